#!/bin/bash
# Procgen coinrun, --preset procgen, on a lent GPU machine (one GPU, 16 cores, Python 3.12, torch there):
# 8 ranks x 8 envs = the paper's 64 actors, stopped by SIGTERM after $TRAIN_SECONDS (default 500), its
# results copied to $OUT: progress.csv, config.json, latest.pt, console.log, episodes.tar.gz, gpu.txt.
# EXTRA: more run_atari flags; MODEL_NAME: the run's name.
#
# What travels in .whl and .gl (ignored by git; made here beforehand):
#   pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#       --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux1_x86_64 \
#       -d .whl gymnasium==1.4.0 farama-notifications ale-py==0.12.1 mpich==5.0.2 mpi4py==4.1.2
#   procgen.tar.xz: procgen_gym 0.1.1 as installed under Python 3.13 (its C++ library is loaded through
#   ctypes, so the same files run under 3.12), with the 29 images of space_backgrounds,
#   water_backgrounds and topdown_backgrounds (games other than coinrun) replaced by 1x1 images to fit
#   the 64 MiB transfer; coinrun's observations and rewards are bit-identical with either set
#   (docs/procgen.md).
#   .gl: apt-get download libglvnd0 libgl1 libglx0 libx11-6 libx11-data libxcb1 libxau6 libxdmcp6 libbsd0
#   libmd0 libglib2.0-0 libffi8 libpcre2-8-0 (Debian 12's, amd64)
set -u
OUT=${OUT:-out}
W=${WHEELS:-.whl}
G=${GL:-.gl}
T=${TRAIN_SECONDS:-500}
M=${MODEL_NAME:-procgen-coinrun-gpu}
D=/tmp/ck/$M
mkdir -p "$OUT"
pip="python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir"
$pip --target /tmp/site $(ls $W/*.whl | grep -v mpich) || exit 1
$pip --prefix /tmp/mp $W/mpich-*.whl || exit 1      # --prefix: --target leaves its lib/ behind
tar xJf $W/procgen.tar.xz -C /tmp/site || exit 1
# Procgen's Qt needs libGL and glib, which the GPU image lacks: Debian's, from $G/*.deb, for the
# libraries the system does not have
mkdir -p /tmp/gl /tmp/gllib
for f in $G/*.deb; do dpkg -x "$f" /tmp/gl; done
for f in /tmp/gl/usr/lib/x86_64-linux-gnu/*.so.* /tmp/gl/lib/x86_64-linux-gnu/*.so.*; do
    [ -e "$f" ] && ! ldconfig -p | grep -q "[[:space:]]$(basename "$f") " && ln -sf "$f" /tmp/gllib/
done
echo "carried: $(ls /tmp/gllib | tr '\n' ' ')"
export PYTHONPATH=/tmp/site PATH=/tmp/mp/bin:$PATH LD_LIBRARY_PATH=/tmp/mp/lib:/tmp/gllib PYTHONUNBUFFERED=1
python3 -c "import gymnasium, procgen_gym; gymnasium.make('procgen_gym/procgen-coinrun-v0').reset(); print('coinrun loads')" ||
    { ldd /tmp/site/procgen_gym/data/prebuilt/libenv.so /tmp/site/procgen_gym.libs/libQt5Gui* | grep "not found"; exit 3; }
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nproc; python3 -V
  python3 -c "import torch; print('torch', torch.__version__, torch.cuda.is_available())"; } > "$OUT/gpu.txt" 2>&1
( while sleep 30; do cp $D/progress.csv "$OUT/" 2>/dev/null; done ) &   # partial results if cut off
keep=$!
timeout --foreground -s TERM -k 60 "$T" mpirun -np 8 python3 -m run_atari --env_name procgen:coinrun \
    --envs_per_rank 8 --seed 0 --checkpoint_dir /tmp/ck --model_name $M ${EXTRA:-} > "$OUT/console.log" 2>&1
echo "mpirun exit status $?" >> "$OUT/console.log"
kill $keep
cp $D/progress.csv $D/config.json $D/latest.pt "$OUT/"
tar czf "$OUT/episodes.tar.gz" -C $D $(cd $D && ls episodes.*.csv)
tail -4 "$OUT/console.log"
