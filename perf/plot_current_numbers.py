#!/usr/bin/env python3
"""Draws the "Current numbers" table of docs/performance.md: model TFLOP/s per GPU of megaton and of the PyTorch
baseline beside it, for each GPU and model, with the speedup over each pair. The table stays the one place the numbers
are written; this draws it.

  python3 perf/plot_current_numbers.py [docs/performance.md] [docs/images/performance.png]
"""
import os
import sys

HEADER = "| GPU | model | megaton ms | TFLOP/s | peak GiB | PyTorch ms | TFLOP/s | peak GiB | speedup |"


def read_table(path):
    lines = open(path, encoding="utf-8").read().splitlines()
    try:
        start = lines.index(HEADER)
    except ValueError:
        sys.exit(f"plot_current_numbers: {path}: no table headed '{HEADER}'")
    rows = []
    for number, line in enumerate(lines[start + 2:], start + 3):
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) != 9:
            sys.exit(f"plot_current_numbers: {path}:{number}: expected 9 cells, got {len(cells)}")
        try:
            rows.append({"gpu": cells[0], "model": cells[1], "megaton": float(cells[3]), "peer": float(cells[6]),
                         "speedup": cells[8]})
        except ValueError:
            sys.exit(f"plot_current_numbers: {path}:{number}: the TFLOP/s cells are not numbers")
    if not rows:
        sys.exit(f"plot_current_numbers: {path}: the table has no rows")
    return rows


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else "docs/performance.md"
    out = sys.argv[2] if len(sys.argv) > 2 else "docs/images/performance.png"
    rows = read_table(src)
    try:
        import matplotlib
    except ImportError:
        if os.path.exists("/usr/bin/python3") and os.path.realpath(sys.executable) != "/usr/bin/python3":
            os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
        sys.exit("plot_current_numbers: matplotlib is missing (apt-get install python3-matplotlib)")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4), dpi=100)
    xs = range(len(rows))
    width = 0.38
    ax.bar([x - width / 2 for x in xs], [r["megaton"] for r in rows], width, label="megaton", color="C0")
    ax.bar([x + width / 2 for x in xs], [r["peer"] for r in rows], width, label="eager PyTorch", color="C7")
    for x, r in zip(xs, rows):
        ax.annotate(r["speedup"], (x - width / 2, r["megaton"]), ha="center", va="bottom", fontsize=9)
    ax.set_xticks(list(xs))
    ax.set_xticklabels([f"{r['gpu']}\n{r['model']}" for r in rows])
    ax.set_ylabel("model TFLOP/s per GPU (bf16)")
    ax.set_title("one training step, sustained (docs/performance.md)")
    ax.set_ylim(0, 1.2 * max(max(r["megaton"], r["peer"]) for r in rows))
    ax.legend(loc="upper center", ncol=2, fontsize=9)
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    fig.savefig(out)
    print(f"plot_current_numbers: {len(rows)} rows of {src} drawn to {out}")


if __name__ == "__main__":
    main()
