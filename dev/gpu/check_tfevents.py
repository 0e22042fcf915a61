#!/usr/bin/env python3
"""Loads a megaton events file (or a directory of them) with TensorBoard's own EventAccumulator and prints every
scalar series: proof that TensorBoard reads what megaton's TensorBoardWriter writes.

Usage: python3 dev/gpu/check_tfevents.py TENSORBOARD_DIR_OR_FILE [EXPECTED_TAG ...]
A sample file: MEGATON_KEEP_TFEVENTS=/tmp/tb megaton_unit_tests --gtest_filter='TensorBoard.IndependentDecoder*'
then: python3 dev/gpu/check_tfevents.py /tmp/tb "lm loss" "learning-rate vs samples"
Exits 1 if no scalars are found or an expected tag is missing.
"""
import sys

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 1
    acc = EventAccumulator(sys.argv[1], size_guidance={"scalars": 0})
    acc.Reload()
    tags = acc.Tags().get("scalars", [])
    if not tags:
        print(f"no scalars in {sys.argv[1]}", file=sys.stderr)
        return 1
    for tag in sorted(tags):
        events = acc.Scalars(tag)
        series = ", ".join(f"{e.step}:{e.value:.6g}" for e in events)
        print(f"{tag} ({len(events)} points): {series}")
    missing = [t for t in sys.argv[2:] if t not in tags]
    if missing:
        print(f"missing tags: {missing}", file=sys.stderr)
        return 1
    print("OK: TensorBoard read", sum(len(acc.Scalars(t)) for t in tags), "scalars in", len(tags), "series")
    return 0


if __name__ == "__main__":
    sys.exit(main())
