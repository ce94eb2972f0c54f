#!/usr/bin/env python3
"""Static SASS instruction mix per kernel entry: `bench/profiling/sass-count.py FILE.sass [entry...]`.

FILE.sass is `cuobjdump -sass` output. The band kernel is fully unrolled (one 64-query tile per
block), so the static count of an entry is close to what each warp issues per tile."""
import re, sys, collections

CLASSES = [
    ("mma", r"^(HMMA|IMMA|DMMA)"), ("ldsm", r"^LDSM"), ("lds", r"^LDS"), ("ldgsts", r"^LDGSTS$"),
    ("ldg", r"^LDG$"), ("stg", r"^STG$"), ("mufu", r"^MUFU"), ("fp32", r"^(FADD|FMUL|FFMA|FMNMX|FSEL|FSETP|FCHK)"),
    ("cvt", r"^(F2F|F2FP|I2F|F2I|FRND)"), ("int", r"^(IMAD|IADD|LEA|ISETP|IMNMX|SHF|LOP|SEL|IABS|VIADD|VIMNMX|ULEA|UIADD|UIMAD|UMOV|USHF|ULOP|UISETP|USEL|S2UR|R2UR)"),
    ("mov", r"^(MOV|SHFL|PRMT|P2R|R2P|PLOP3|CS2R|S2R)"), ("ctrl", r"^(BRA|BAR|BSYNC|BSSY|EXIT|CALL|RET|WARPSYNC|VOTE|DEPBAR|LDGDEPBAR|NOP|YIELD|CCTL|ERRBAR|MEMBAR)$"),
]

def parse(path):
    funcs, cur = {}, None
    for line in open(path):
        m = re.match(r"\s*Function : (\S+)", line)
        if m:
            cur = m.group(1); funcs[cur] = []
            continue
        m = re.match(r"\s*/\*[0-9a-f]{4,}\*/\s+(@!?U?P\w+\s+)?([A-Z0-9_.]+)", line)
        if m and cur:
            funcs[cur].append(m.group(2))
    return funcs

def main():
    funcs = parse(sys.argv[1])
    want = sys.argv[2:] or [f for f in funcs if f.startswith("dswa_")]
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

main()
