import json, sys, glob
d = sys.argv[1]
best = {}
for f in glob.glob(d + "/*rem-*.json") + glob.glob(d + "/*uni.json"):
    tag = "uniform" if "uni" in f else "balanced"
    for r in json.load(open(f))["records"]:
        if r.get("path") != "classical": continue
        st = {s["name"]: s["us_median"] for s in r.get("stages", [])}
        k = (r["preset"], tag, r["batch"])
        cur = (r["us_median"], st.get("gate_up_gemm", 0), st.get("down_gemm", 0), r.get("sm_clock_mhz", 0), r.get("config", ""))
        if k not in best or cur[0] < best[k][0]: best[k] = cur
for p in sorted({k[0] for k in best}):
    b0 = best.get((p, "balanced", 2048)); b3 = best.get((p, "balanced", 4096))
    print(p)
    for k in sorted(x for x in best if x[0] == p):
        v = best[k]
        rows = k[2] * 8 // 128
        extra = ""
        if b0 and b3 and k[1] == "balanced":
            fr = [(v[i] - b0[i]) / (b3[i] - b0[i]) if b3[i] != b0[i] else 0 for i in range(3)]
            extra = f"  (t - t2048)/(t4096 - t2048): layer {fr[0]:.2f} gate_up {fr[1]:.2f} down {fr[2]:.2f}"
        print(f"  {k[1]:9s} B={k[2]:5d} rows/expert={rows:4d}  layer {v[0]:8.1f}  gate_up {v[1]:7.1f}  down {v[2]:7.1f}  MHz {v[3]:.0f} {v[4]}{extra}")
