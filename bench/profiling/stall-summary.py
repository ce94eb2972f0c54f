#!/usr/bin/env python3
"""Summarise `ncu --page source --csv --print-source sass` output: warp-stall samples per
opcode class and the instructions with the most samples. Tolerant of column names: the SASS
text is the column named like 'Source', samples the columns naming 'Sampling' or 'stall'."""
import csv, re, sys, collections

def num(x):
    try:
        return float(str(x).replace(",", ""))
    except ValueError:
        return None

def main():
    rows = list(csv.reader(open(sys.argv[1], newline="")))
    hi = next(i for i, r in enumerate(rows) if any(c.strip() == "Source" for c in r))
    head, body = rows[hi], rows[hi + 1:]
    src = head.index("Source")
    cols = [j for j, h in enumerate(head) if re.search(r"sampl|stall", h, re.I)]
    tot = [j for j in cols if re.search(r"All Samples|Sampling \(All", head[j])] or cols[:1]
    print("columns:", "; ".join(head[j] for j in cols))
    per_op = collections.defaultdict(lambda: collections.Counter())
    ins = []
    for r in body:
        if len(r) <= src: continue
        text = r[src].strip()
        m = re.match(r"(@!?U?P\w+\s+)?([A-Z0-9_]+)", text)
        if not m: continue
        op = m.group(2)
        for j in cols:
            v = num(r[j]) if j < len(r) else None
            if v: per_op[op][head[j]] += v
        t = num(r[tot[0]]) if tot[0] < len(r) else None
        if t: ins.append((t, r[0], text))
    total = sum(c[head[tot[0]]] for c in per_op.values()) or 1
    print(f"total samples ({head[tot[0]]}): {total:.0f}")
    print("by opcode (share of all samples; the top reasons):")
    for op, c in sorted(per_op.items(), key=lambda kv: -kv[1][head[tot[0]]])[:16]:
        reasons = sorted(((v, k) for k, v in c.items()
                          if k.startswith("stall_") and "Not Issued" not in k), reverse=True)[:3]
        print(f"  {op:10s} {100 * c[head[tot[0]]] / total:5.1f}%  " +
              ", ".join(f"{k} {100 * v / total:.1f}%" for v, k in reasons))
    print("top instructions:")
    for t, addr, text in sorted(ins, reverse=True)[:20]:
        print(f"  {100 * t / total:5.1f}%  {addr}  {text[:90]}")

main()
