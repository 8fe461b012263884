#!/usr/bin/env bash
# Every figure of the documentation and the README's sample output, made with the installed
# pysim from this checkout (about 15 minutes on two cores, most of it the job streams'
# figures). Run from anywhere; the figures are written beside this script. The figure beside
# BookSim needs BookSim itself: set BOOKSIM to its binary (bench/vs_booksim.py says how to
# build it; about 40 minutes more), else that figure is kept as it is. Last, current.py
# rewrites the README's sample and records what the figures were made from
# (manifest.json): tests/test_figures_current.py fails when that changes.
set -euo pipefail
cd "$(dirname "$0")"
python="${PYTHON:-python}"
tmp="$(mktemp -d)"

# latency and throughput against offered load, 8x8 mesh, 2 and 8 VCs, three seeds per point
pysim sweep mesh8x8 --param traffic.injection_rate=0.04:0.48:0.04 --param network.vcs=2,8 \
    --param simulation.seed=1,2,3 --db "$tmp/mesh.sqlite" -q
pysim plot "$tmp/mesh.sqlite" --kind latency-load --series network.vcs \
    -o latency-load-mesh8x8.png --force
pysim plot "$tmp/mesh.sqlite" --kind throughput --series network.vcs \
    -o throughput-mesh8x8.png --force

# all-reduce on ring8 against message size (NICs at 64 GB/s so that the bidirectional ring
# can use both directions of every 32 GB/s link)
pysim sweep ring8 --param workload.kind=collective \
    --param workload.bytes=1024,4096,16384,65536,262144,1048576,4194304,16777216,67108864 \
    --param workload.algorithm=ring,bidir_ring,halving_doubling --param network.vcs=4 \
    --param network.vc_buffer_flits=16 --param workload.packet_flits=16 \
    --param network.injection_gbps=64 --param network.ejection_gbps=64 \
    --db "$tmp/coll.sqlite" -q
pysim plot "$tmp/coll.sqlite" --kind collective --y busbw_gbps \
    -o collective-busbw-ring8.png --force
pysim plot "$tmp/coll.sqlite" --kind speedup --group workload.bytes \
    --series workload.algorithm --baseline ring --y collective_cycles \
    -o speedup-ring8.png --force

# link utilisation: transpose traffic on the mesh; a bidirectional-ring all-reduce on DGX-1
pysim run mesh8x8 --set traffic.pattern=transpose --json "$tmp/transpose.json" -q
pysim plot "$tmp/transpose.json" --kind link-utilisation \
    -o link-utilisation-transpose.png --force
pysim run dgx1-v100 --set workload.kind=collective --set workload.algorithm=bidir_ring \
    --set workload.bytes=4194304 --json "$tmp/dgx.json" -q
pysim plot "$tmp/dgx.json" --kind link-utilisation -o link-utilisation-dgx1-v100.png --force

# timelines: the README's op graph on MC-DLA; an all-reduce whose reductions run on the NPUs
cat > "$tmp/ops.toml" <<'OPS'
[[ops]]
name = "forward"
kind = "compute"
node = "npu0"
cycles = 5000

[[ops]]
name = "offload activations"
kind = "mem_write"
npu = "npu0"
mem = "mem0"
bytes = 4194304
after = "forward"

[[ops]]
name = "to the next stage"
kind = "send"
src = "npu0"
dst = "npu1"
bytes = 1048576
after = "forward"
OPS
pysim run mcdla-8 --set workload.kind=graph --set "workload.file=$tmp/ops.toml" \
    --trace "$tmp/graph.json" -q
pysim plot "$tmp/graph.json" --kind timeline -o timeline-mcdla-8.png --force
pysim run dgx1-v100 --set workload.kind=collective --set workload.engine=npu \
    --set workload.bytes=4194304 --trace "$tmp/allreduce.json" -q
pysim plot "$tmp/allreduce.json" --kind timeline -o timeline-allreduce-dgx1-v100.png --force

# training: the iteration's breakdown with reductions on the NPUs and on the offload engine;
# memory held over time with the offload policy on MC-DLA
pysim sweep dgx1-v100 --param workload.kind=training --param workload.model=resnet50 \
    --param "workload.model_params={image = 64}" --param workload.batch=64,256 \
    --param workload.engine=npu,offload --param workload.iterations=1 \
    --db "$tmp/train.sqlite" -q
pysim plot "$tmp/train.sqlite" --kind breakdown --x workload.batch \
    --series workload.engine -o breakdown-dgx1-v100.png --force
pysim run mcdla-8 --set workload.kind=training --set workload.model=resnet50 \
    --set "workload.model_params={image = 64}" --set workload.batch=256 \
    --set workload.iterations=1 --set workload.memory.policy=offload \
    --set workload.mem_piece_bytes=1048576 --json "$tmp/memory.json" -q
pysim plot "$tmp/memory.json" --kind memory -o memory-mcdla-8.png --force

# systems
for name in dgx1-v100 mcdla-8 torus4x4x4; do
    pysim topo "$name" --draw "$name.png" --force > /dev/null
done
rm -r "$tmp"

# the job streams' figures (jobs-mapa-fp32-sync.png, jobs-mapa-mixed-sync.png): MAPA's
# reproduction at the flow level
"$python" ../../bench/mapa.py --model flow --variants fp32-sync,mixed-sync --figures . --out "$(mktemp -d)/mapa.json" --force > /dev/null

# pysim beside BookSim (booksim-vs-pysim.png), with BookSim
if [ -n "${BOOKSIM:-}" ]; then
    "$python" ../../bench/vs_booksim.py --jobs 2 --fig booksim-vs-pysim.png --force > /dev/null
    made_booksim=--booksim
else
    echo "booksim-vs-pysim.png kept: set BOOKSIM to BookSim's binary to make it again" >&2
    made_booksim=
fi

"$python" current.py --samples --write $made_booksim
