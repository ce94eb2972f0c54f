/* dswa_forward_cuda (and dswa_backward_cuda) without a usable CUDA device (or in a build
   without CUDA): a valid problem is validated and then refused with DSWA_ERR_NO_DEVICE and a
   message, and the output is not touched. The pointers are host memory: the call must not dereference them. With a device
   present this test is skipped (tests/test_cuda.c covers the device). Where libcuda.so.1
   cannot be loaded at all, the message must say that no driver was found, not that the
   driver's version is insufficient (which sends a user to upgrade a driver they lack). */
#include <stdio.h>
#include <string.h>
#include "dswa.h"
#include "testutil.h"
#ifdef DSWA_HAVE_CUDA
#include <dlfcn.h>

/* Whether the CUDA driver library loads here (as the CUDA runtime loads it). */
static int have_driver(void) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (h) dlclose(h);
    return h != NULL;
}
#endif

int main(void) {
    if (dswa_cuda_available())
        tu_skip("a CUDA device is present (tests/test_cuda.c covers it)");

    for (int t = 0; t < 3; t++) {
        const dswa_dtype dt = (dswa_dtype)t;
        dswa_problem p = dswa_problem_default(1, 17 * 4, 24, 64, 17);
        p.dtype = dt;
        p.scale = 0.125f;
        p.v.pair = 0;
        tu_rng rng;
        tu_rng_init(&rng, 99 + (uint64_t)t);
        int64_t nq = 0, nk = 0, nv = 0;
        void *q = tu_new_input(&p, &p.q, &rng, &nq), *k = tu_new_input(&p, &p.k, &rng, &nk);
        void *v = tu_new_input(&p, &p.v, &rng, &nv);
        tu_outbuf o = tu_outbuf_new(&p);

        dswa_status s = dswa_forward_cuda(&p, q, k, v, o.out, NULL);
        const char *msg = dswa_last_error();
        CHECK(s == DSWA_ERR_NO_DEVICE, "%s: dswa_forward_cuda returned %d (%s): %s", dswa_dtype_name(dt),
              (int)s, dswa_status_string(s), msg ? msg : "(null)");
        CHECK(msg != NULL && msg[0] != '\0', "%s: DSWA_ERR_NO_DEVICE without a message", dswa_dtype_name(dt));
        CHECK(tu_outbuf_untouched(&o), "%s: the output was written", dswa_dtype_name(dt));
        if (t == 0) printf("dswa_forward_cuda: %s: %s\n", dswa_status_string(s), msg ? msg : "(null)");
#ifdef DSWA_HAVE_CUDA
        if (!have_driver())
            CHECK(msg && strstr(msg, "no CUDA driver found (libcuda.so.1 not loadable)") &&
                  !strstr(msg, "insufficient"), "no libcuda.so.1 here, but the message is \"%s\"",
                  msg ? msg : "(null)");
#else
        CHECK(msg && strstr(msg, "built without CUDA"), "a build without CUDA says \"%s\"", msg ? msg : "(null)");
#endif

        /* The message survives dswa_cuda_available(), which must not clobber it. */
        char saved[512];
        snprintf(saved, sizeof saved, "%s", msg ? msg : "");
        CHECK(dswa_cuda_available() == 0, "dswa_cuda_available() changed its answer");
        CHECK(strcmp(saved, dswa_last_error()) == 0, "dswa_cuda_available() replaced the message "
              "\"%s\" with \"%s\"", saved, dswa_last_error());

        /* Validation still comes first: a bad problem is INVALID_ARGUMENT, not NO_DEVICE. */
        dswa_problem bad = p;
        bad.window_left = -2;
        s = dswa_forward_cuda(&bad, q, k, v, o.out, NULL);
        CHECK(s == DSWA_ERR_INVALID_ARGUMENT, "%s: a bad problem gave %d, not INVALID_ARGUMENT",
              dswa_dtype_name(dt), (int)s);
        CHECK(strstr(dswa_last_error(), "window_left") != NULL, "message \"%s\"", dswa_last_error());
        CHECK(tu_outbuf_untouched(&o), "%s: the output was written", dswa_dtype_name(dt));

        /* A non-default stream changes nothing (it is never dereferenced either). */
        s = dswa_forward_cuda(&p, q, k, v, o.out, (void *)&rng);
        CHECK(s == DSWA_ERR_NO_DEVICE, "%s: with a stream: %d", dswa_dtype_name(dt), (int)s);
        CHECK(tu_outbuf_untouched(&o), "%s: the output was written", dswa_dtype_name(dt));

        /* The CPU backend still works in the same process. */
        s = dswa_forward_cpu(&p, q, k, v, o.out);
        CHECK(s == DSWA_OK, "%s: dswa_forward_cpu after the CUDA refusal: %s", dswa_dtype_name(dt),
              dswa_last_error());
        int64_t un = 0, cl = 0;
        tu_outbuf_check(&p, &o, &un, &cl);
        CHECK(un == 0 && cl == 0, "%s: cpu run: %lld unwritten, %lld clobbered", dswa_dtype_name(dt),
              (long long)un, (long long)cl);

        /* The backward likewise: validated (its workspace too), then NO_DEVICE, nothing written. */
        dswa_backward_problem bp = dswa_backward_problem_default(&p);
        void *g = tu_new_input(&p, &p.out, &rng, NULL);
        tu_outbuf grad[3];
        for (int i = 0; i < 3; i++) grad[i] = tu_outbuf_alloc(nq, dt);
        const size_t wsb = dswa_backward_workspace_bytes(&bp);
        void *ws = tu_alloc((int64_t)wsb, DSWA_F32);   /* host: never dereferenced */
        s = dswa_backward_cuda(&bp, q, k, v, g, grad[0].out, grad[1].out, grad[2].out, NULL, ws, wsb, NULL);
        CHECK(s == DSWA_ERR_NO_DEVICE && dswa_last_error()[0], "%s: dswa_backward_cuda returned %d: %s",
              dswa_dtype_name(dt), (int)s, dswa_last_error());
        s = dswa_backward_cuda(&bp, q, k, v, g, grad[0].out, grad[1].out, grad[2].out, NULL, NULL, 0, NULL);
        CHECK(s == DSWA_ERR_INVALID_ARGUMENT && strstr(dswa_last_error(), "workspace = NULL"),
              "%s: no workspace gave %d: %s", dswa_dtype_name(dt), (int)s, dswa_last_error());
        for (int i = 0; i < 3; i++) {
            CHECK(tu_outbuf_untouched(&grad[i]), "%s: gradient %d was written", dswa_dtype_name(dt), i);
            tu_outbuf_free(&grad[i]);
        }
        tu_free(ws);
        tu_free(g);

        tu_outbuf_free(&o);
        tu_free(q); tu_free(k); tu_free(v);
    }
    TEST_MAIN_RETURN("test_cuda_nodevice");
}
