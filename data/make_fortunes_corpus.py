#!/usr/bin/env python3
"""Builds the bundled demo/test corpus: one JSON line {"text": ...} per fortune from Debian's `fortunes` and
`fortunes-min` packages (/usr/share/games/fortunes, ~2.5 MB of plain English: quotations, jokes, definitions).
Fortunes are separated by lines holding only '%'. ASCII-art collections are left out. The order is fixed (files
sorted by name), so the output is identical on every machine with the same package version."""
import argparse
import json
import os
import sys

SKIP = {"art", "ascii-art"}


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--fortunes-dir", default="/usr/share/games/fortunes")
    ap.add_argument("--output", required=True)
    args = ap.parse_args()
    if not os.path.isdir(args.fortunes_dir):
        sys.exit(f"make_fortunes_corpus: {args.fortunes_dir} not found; install Debian 'fortunes' (make deps)")
    names = sorted(n for n in os.listdir(args.fortunes_dir)
                   if "." not in n and n not in SKIP and os.path.isfile(os.path.join(args.fortunes_dir, n)))
    docs = 0
    tmp = args.output + ".tmp"
    with open(tmp, "w", encoding="utf-8") as out:
        for name in names:
            with open(os.path.join(args.fortunes_dir, name), encoding="utf-8", errors="replace") as f:
                chunk = []
                for line in f.read().split("\n") + ["%"]:
                    if line.strip() == "%":
                        text = "\n".join(chunk).strip("\n")
                        if text.strip():
                            out.write(json.dumps({"text": text, "source": name}, ensure_ascii=False) + "\n")
                            docs += 1
                        chunk = []
                    else:
                        chunk.append(line)
    os.replace(tmp, args.output)
    print(f"make_fortunes_corpus: {docs} documents from {len(names)} files -> {args.output}")


if __name__ == "__main__":
    main()
