#!/bin/bash
# perf/checkpoint/train_save.sh: what a checkpoint costs `megaton train` on a GPU node, synchronous against
# --async-save, beside the disk's own sequential write speed, in one run.
#   GPT 1.3B (24 x 2048, seq 2048, micro-batch 8, bf16 with fp32 master weights and Adam: 18.4 GB of state), random
#   tokens, 30 iterations, a save every 10 (iterations 10, 20, 30), --keep-last 1. For each mode: the time the loop was
#   blocked per save (synchronous: the save; async: the copy to host memory), the background write time, and the
#   seconds per iteration of the whole run against a run without saves. The disk: `dd` of 8 GiB with fdatasync.
#   Mode `load` (after `sync`): the last synchronous checkpoint read back by `megaton train --load` with the file's
#   pages dropped from the page cache first, beside `dd` reading its 8 GiB file back the same way.
#   bash perf/checkpoint/train_save.sh [BUILD_DIR (build-gpu)] [DIR (a directory on the disk to measure; ./ckpt-bench)]
#   Mode `torch`: `torch.save` of tensors of the same shapes and dtypes (bf16 weights, fp32 masters and Adam moments,
#   made on the GPU as a Megatron rank's state is) into one file, then fsync: the PyTorch stacks' synchronous save.
#   Mode `ranks`: RANKS (2) ranks on the node's GPU (--tensor-model-parallel-size RANKS over --distributed-backend mpi,
#   micro-batch 1, 10 iterations, a save every 5): every rank writes its slices of the same files.
#   MODES (default "none sync load async torch ranks") picks the runs.
set -euo pipefail
src="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build=$(realpath -m "${1:-$src/build-gpu}")
dir=$(realpath -m "${2:-$PWD/ckpt-bench}")
mkdir -p "$dir"
trap 'rm -rf "$dir"' EXIT
dd_line=$(dd if=/dev/zero of="$dir/dd.bin" bs=64M count=128 conv=fdatasync 2>&1 | tail -1)
echo "disk ($dir): dd 8 GiB with fdatasync: $dd_line"
evict() {  # drops the files' pages from the page cache (written back first), so the next read comes from the disk
  python3 -c 'import os, sys
for p in sys.argv[1:]:
    fd = os.open(p, os.O_RDONLY); os.fsync(fd); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED); os.close(fd)' "$@"
}
python3 "$src/perf/gpu/synth_data.py" "$dir/synth_text_document" > /dev/null
args=(--vocab-size 50257 --data-path "$dir/synth_text_document" --split 99,1,0 --bf16 --lr 1e-4 --min-lr 1e-5
      --eval-interval 100000 --eval-iters 1 --device cuda --distributed-backend nccl --seed 1234 --hidden-dropout 0
      --attention-dropout 0 --train-iters 30 --log-interval 5 --num-layers 24 --hidden-size 2048
      --num-attention-heads 16 --seq-length 2048 --max-position-embeddings 2048 --micro-batch-size 8
      --global-batch-size 8)
run() {  # run NAME ARGS...
  local name=$1
  shift
  rm -rf "$dir/save"
  "$build/megaton" train "${args[@]}" "$@" > "$dir/$name.log" 2>&1 || { tail -20 "$dir/$name.log"; exit 1; }
  cp "$dir/$name.log" "${OUT:-/tmp}/train_save_$name.log" 2> /dev/null || true
}
MODES=${MODES:-none sync load async torch ranks}
for m in $MODES; do
  case $m in
    none) run none ;;
    sync) run sync --save "$dir/save" --save-interval 10 --keep-last 1 ;;
    load)
      [ -d "$dir/save" ] || { echo "mode load needs mode sync before it"; exit 1; }
      evict "$dir/dd.bin"
      echo "disk: dd read of 8 GiB from the disk: $(dd if="$dir/dd.bin" of=/dev/null bs=64M 2>&1 | tail -1)"
      mapfile -t files < <(find "$dir/save" -type f)
      evict "${files[@]}"
      "$build/megaton" train "${args[@]}" --load "$dir/save" --train-iters 31 --override-lr-scheduler > "$dir/load.log" 2>&1 ||
        { tail -20 "$dir/load.log"; exit 1; }
      grep -o "loaded checkpoint .*" "$dir/load.log" | head -1 ;;
    torch)
      python3 - "$dir/torch_save.pt" <<'PY'
import os, sys, time, torch
L, H, S, V = 24, 2048, 2048, 50304  # the run's model: layers, hidden, positions, padded vocabulary
dev = "cuda" if torch.cuda.is_available() else "cpu"
shapes = [(V, H), (S, H)] + [(H,)] * 2  # embeddings, final LayerNorm
for _ in range(L):
    shapes += [(H,), (H,), (3 * H, H), (3 * H,), (H, H), (H,), (H,), (H,), (4 * H, H), (4 * H,), (H, 4 * H), (H,)]
state = {}
for i, shape in enumerate(shapes):
    state[f"p{i}.weight"] = torch.randn(shape, device=dev).to(torch.bfloat16)
    for k in ("master", "exp_avg", "exp_avg_sq"):
        state[f"p{i}.{k}"] = torch.randn(shape, device=dev)
gb = sum(t.numel() * t.element_size() for t in state.values()) / 1e9
if dev == "cuda":
    torch.cuda.synchronize()
t0 = time.perf_counter()
with open(sys.argv[1], "wb") as f:
    torch.save(state, f)
    f.flush()
    os.fsync(f.fileno())
s = time.perf_counter() - t0
print(f"torch.save: {gb:.2f} GB from {dev} in {s:.2f} s with fsync ({gb / s:.2f} GB/s)")
PY
      rm -f "$dir/torch_save.pt" ;;
    async) run async --save "$dir/save" --save-interval 10 --keep-last 1 --async-save ;;
    ranks)
      rm -rf "$dir/save"
      ${MPIRUN:-mpirun} -np "${RANKS:-2}" --bind-to none "$build/megaton" train "${args[@]}" --distributed-backend mpi \
        --tensor-model-parallel-size "${RANKS:-2}" --micro-batch-size 1 --global-batch-size 1 --train-iters 10 \
        --save "$dir/save" --save-interval 5 --keep-last 1 > "$dir/ranks.log" 2>&1 || { tail -20 "$dir/ranks.log"; exit 1; }
      cp "$dir/ranks.log" "${OUT:-/tmp}/train_save_ranks.log" 2> /dev/null || true ;;
  esac
done
rm -f "$dir/dd.bin"
python3 - "$dir" $MODES <<'PY'
import os, re, sys
d, modes = sys.argv[1], sys.argv[2:]
def per_iter(name):
    m = re.search(r"summary: .* in ([0-9.]+) s \(([0-9.]+) s/iteration", open(f"{d}/{name}.log").read())
    return float(m.group(1)), float(m.group(2))
def ms(pattern, name):
    return [float(x) / 1e3 for x in re.findall(pattern, open(f"{d}/{name}.log").read())]
def found(pattern, name):
    return [float(x) for x in re.findall(pattern, open(f"{d}/{name}.log").read())] if name in modes else []
sync_block = [x / 1e3 for x in found(r"saved checkpoint at iteration \d+ to \S+ \(([0-9.]+) ms\)", "sync")]
ranks_block = [x / 1e3 for x in found(r"saved checkpoint at iteration \d+ to \S+ \(([0-9.]+) ms\)", "ranks")]
async_block = [x / 1e3 for x in found(r"copied to host memory in ([0-9.]+) ms", "async")]
async_write = found(r"written in the background in ([0-9.]+) s", "async")
reserve = found(r"of host memory for the state's copy reserved in ([0-9.]+) s", "async")
gb = found(r"saved checkpoint \S+ \(iteration \d+, \d+ tensors, ([0-9.]+) GB", "sync") + \
     found(r"saved checkpoint \S+ \(iteration \d+, \d+ tensors, ([0-9.]+) GB", "async")
print(f"checkpoint: {gb[0] if gb else float('nan'):.2f} GB" +
      (f"; --async-save reserved its pinned host memory at start in {reserve[0]:.1f} s" if reserve else ""))
print(f"{'run':10} {'total s':>9} {'s/iter':>8} {'blocked per save (s)':>30} {'background write (s)':>26}")
for name, block, write in (("none", [], []), ("sync", sync_block, []), ("async", async_block, async_write),
                           ("ranks", ranks_block, [])):
    if name not in modes:
        continue
    total, it = per_iter(name)
    print(f"{name:10} {total:9.1f} {it:8.3f} {' '.join(f'{b:.2f}' for b in block):>30} {' '.join(f'{w:.1f}' for w in write):>26}")
PY
