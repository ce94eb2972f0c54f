#!/usr/bin/env python3
"""Static SASS instruction mix per kernel entry: `bench/profiling/sass-count.py FILE.sass [entry...]`.

FILE.sass is `cuobjdump -sass` output (cuobjdump runs nvdisasm for it: the toolkit's, or the one
Triton ships in triton/backends/nvidia/bin, on PATH or in NVDISASM_PATH). The band kernel is
fully unrolled (one 64-query tile per block), so the static count of an entry is close to what
each warp issues per tile. Entries with loops (a branch back to an earlier address) also list
their loop bodies, largest first, so that the count per pass of a loop can be multiplied out
(the backward's passes run their row loop once per row of the warp)."""
import re, sys, collections

CLASSES = [
    ("mma", r"^(HMMA|IMMA|DMMA)"), ("ldsm", r"^LDSM"), ("lds", r"^LDS"), ("ldgsts", r"^LDGSTS$"),
    ("ldg", r"^LDG$"), ("stg", r"^STG$"), ("mufu", r"^MUFU"), ("fp32", r"^(FADD|FMUL|FFMA|FMNMX|FSEL|FSETP|FCHK)"),
    ("cvt", r"^(F2F|F2FP|I2F|F2I|FRND)"), ("int", r"^(IMAD|IADD|LEA|ISETP|IMNMX|SHF|LOP|SEL|IABS|VIADD|VIMNMX|ULEA|UIADD|UIMAD|UMOV|USHF|ULOP|UISETP|USEL|S2UR|R2UR)"),
    ("mov", r"^(MOV|SHFL|PRMT|P2R|R2P|PLOP3|CS2R|S2R)"), ("ctrl", r"^(BRA|BAR|BSYNC|BSSY|EXIT|CALL|RET|WARPSYNC|VOTE|DEPBAR|LDGDEPBAR|NOP|YIELD|CCTL|ERRBAR|MEMBAR)$"),
]

def parse(path):
    """{entry: [opcode, ...]} and {entry: [(address, target) of each branch back]}."""
    funcs, loops, cur = {}, {}, None
    for line in open(path):
        m = re.match(r"\s*Function : (\S+)", line)
        if m:
            cur = m.group(1); funcs[cur] = []; loops[cur] = []
            continue
        m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z0-9_.]+)([^;]*)", line)
        if m and cur:
            funcs[cur].append(m.group(3))
            t = re.search(r"0x([0-9a-f]+)", m.group(4))
            # a loop's back edge is predicated; an unpredicated branch back is the return
            # from an out-of-line slow path (e.g. a wide-range sincos) placed after the body
            if m.group(3) == "BRA" and m.group(2) and t and int(t.group(1), 16) < int(m.group(1), 16):
                loops[cur].append((int(m.group(1), 16), int(t.group(1), 16)))
    return funcs, loops

def main():
    funcs, loops = parse(sys.argv[1])
    want = sys.argv[2:] or [f for f in funcs if "dswa_" in f]
    for f in want:
        ops = funcs[f]
        cls = collections.Counter()
        for op in ops:
            base = op.split(".")[0]
            for name, rx in CLASSES:
                if re.match(rx, base):
                    cls[name] += 1; break
            else:
                cls["other:" + base] += 1
        print(f"{f}: {len(ops)} instructions")
        print("   " + "  ".join(f"{k} {v}" for k, v in cls.most_common()))
        bodies = sorted((((a - t) // 16 + 1, t) for a, t in loops[f]), reverse=True)   # 16 bytes an instruction
        if bodies:
            print("   loops: " + ", ".join(f"{n} instructions from {t:#x}" for n, t in bodies[:4]))

main()
