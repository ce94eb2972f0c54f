"""Runs every test_* function of python/tests/test_*.py without pytest (CI needs no extra
package). A unittest.SkipTest is a skip. Ends with 'N passed, N failed, N skipped'; exit 1
when any failed."""
import glob
import importlib
import os
import sys
import time
import traceback
import unittest

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
passed = failed = skipped = 0
for path in sorted(glob.glob(os.path.join(here, "test_*.py"))):
    mod = importlib.import_module(os.path.basename(path)[:-3])
    for name in [n for n in vars(mod) if n.startswith("test_") and callable(getattr(mod, n))]:
        t0 = time.time()
        try:
            getattr(mod, name)()
            passed += 1
            print(f"PASS  {mod.__name__}.{name} ({time.time() - t0:.1f} s)", flush=True)
        except unittest.SkipTest as e:
            skipped += 1
            print(f"SKIP  {mod.__name__}.{name}: {e}", flush=True)
        except Exception:
            failed += 1
            print(f"FAIL  {mod.__name__}.{name}", flush=True)
            traceback.print_exc()
print(f"{passed} passed, {failed} failed, {skipped} skipped")
sys.exit(1 if failed else 0)
