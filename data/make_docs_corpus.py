#!/usr/bin/env python3
"""Builds a larger real-text corpus for numerics runs (perf/fp8/run.sh's NUMERICS_CORPUS): one JSON line {"text": ...}
per reStructuredText source of Debian's `linux-doc-6.1` (the kernel's Documentation/) and `python3.11-doc` (the Python
manuals' _sources), about 40 million characters of English technical prose with code: ~10 million GPT-2 tokens, against
the fortunes corpus's 0.7 million. The packages are fetched with `apt-get download` into a scratch directory and
unpacked there (nothing is installed); files are taken in sorted order up to --max-chars, so the output is the same on
every machine with the same package versions. Writes OUTPUT.xz (xz -6) unless --no-xz."""
import argparse
import glob
import gzip
import json
import os
import subprocess
import sys
import tempfile

PACKAGES = ["linux-doc-6.1", "python3.11-doc"]


def sources(root):
    for dirpath, dirnames, files in os.walk(root):
        dirnames.sort()
        for f in sorted(files):
            p = os.path.join(dirpath, f)
            if f.endswith((".rst.gz", ".txt.gz")):
                yield p, lambda p=p: gzip.open(p, "rt", encoding="utf-8", errors="replace").read()
            elif f.endswith(".rst") or (f.endswith(".txt") and "/_sources/" in p):
                yield p, lambda p=p: open(p, encoding="utf-8", errors="replace").read()


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--output", required=True, help="the .jsonl to write")
    ap.add_argument("--max-chars", type=int, default=40_000_000)
    ap.add_argument("--no-xz", action="store_true", help="leave the .jsonl uncompressed")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        r = subprocess.run(["apt-get", "download", *PACKAGES], cwd=tmp, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"make_docs_corpus: apt-get download {' '.join(PACKAGES)} failed: {r.stderr.strip()}")
        for deb in sorted(glob.glob(os.path.join(tmp, "*.deb"))):
            subprocess.run(["dpkg-deb", "-x", deb, os.path.join(tmp, "root")], check=True)
        docs = chars = 0
        with open(args.output + ".tmp", "w", encoding="utf-8") as out:
            for _, read in sources(os.path.join(tmp, "root", "usr", "share", "doc")):
                text = read()
                if len(text) < 200:
                    continue
                out.write(json.dumps({"text": text}) + "\n")
                docs, chars = docs + 1, chars + len(text)
                if chars >= args.max_chars:
                    break
        os.replace(args.output + ".tmp", args.output)
    if not args.no_xz:
        subprocess.run(["xz", "-6", "-f", args.output], check=True)
    print(f"make_docs_corpus: {docs} documents, {chars} characters -> {args.output}{'' if args.no_xz else '.xz'}")


if __name__ == "__main__":
    main()
