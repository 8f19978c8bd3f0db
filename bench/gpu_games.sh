#!/bin/bash
# One Atari game at 10M agent steps with --preset fast on a lent GPU machine (one GPU, 16 cores, Python
# 3.12, torch there), in chunks: a session's 15 minutes of device time hold about half a run, so each
# call trains for $TRAIN_SECONDS (default 500), is stopped by SIGTERM (ppo1 then writes a checkpoint),
# and hands back the run folder as $OUT/run.tar.gz (checkpoint, config, progress.csv, episodes.*.csv:
# all a resume needs); the next call, given that archive as $RESUME, continues the run where it
# stopped. Also in $OUT: progress.csv, config.json, console.log, gpu.txt.
#
#   GAME=BeamRider TRAIN_SECONDS=515 bash bench/gpu_games.sh        # (device run, carry .whl-atari)
#   GAME=Breakout TRAIN_SECONDS=515 RESUME=run.tar.gz bash bench/gpu_games.sh   # the next chunk: the
#       previous chunk's $OUT/run.tar.gz (archives are not committed: .gitignore)
#
#   GAME (default BeamRider): <GAME>NoFrameskip-v4; NP x ENVS actors (default 16 x 8 = 128);
#   EXTRA: more run_atari flags (default `--optim_batchsize 8`: 16 minibatches of 1,024 samples per
#   epoch, so the 128 actors make 4x, not 16x, the 8-actor run's minibatch of 256).
#
# What travels in .whl-atari (ignored by git; made here beforehand):
#   pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#       --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux1_x86_64 \
#       -d .whl-atari gymnasium==1.4.0 farama-notifications ale-py==0.12.1 mpich==5.0.2 mpi4py==4.1.2
# (the image has torch, numpy and opencv-python-headless).
set -u
OUT=${OUT:-out}
W=${WHEELS:-.whl-atari}
T=${TRAIN_SECONDS:-500}
GAME=${GAME:-BeamRider}
M=${MODEL_NAME:-fast-$GAME-10M-gpu}
D=/tmp/ck/$M
mkdir -p "$OUT" /tmp/ck
pip="python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade"  # --upgrade: a warm machine has them
$pip --target /tmp/site $(ls $W/*.whl | grep -v mpich) || exit 1
$pip --prefix /tmp/mp $W/mpich-*.whl || exit 1      # --prefix: --target leaves its lib/ behind
export PYTHONPATH=/tmp/site PATH=/tmp/mp/bin:$PATH LD_LIBRARY_PATH=/tmp/mp/lib PYTHONUNBUFFERED=1
if [ -n "${RESUME:-}" ]; then tar xzf "$RESUME" -C /tmp/ck || exit 1; fi   # ppo1 says where it resumes
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nproc; python3 -V
  python3 -c "import torch; print('torch', torch.__version__, torch.cuda.is_available())"; } > "$OUT/gpu.txt" 2>&1
( while sleep 30; do cp $D/progress.csv "$OUT/" 2>/dev/null; done ) &   # partial results if cut off
keep=$!
timeout --foreground -s TERM -k 60 "$T" mpirun -np ${NP:-16} python3 -m run_atari --preset fast \
    --env_name ${GAME}NoFrameskip-v4 --envs_per_rank ${ENVS:-8} --env_steps 10000000 --device ${DEVICE:-cuda} --seed 0 \
    --checkpoint_dir /tmp/ck --model_name $M ${EXTRA:---optim_batchsize 8} >> "$OUT/console.log" 2>&1
echo "mpirun exit status $?" >> "$OUT/console.log"
kill $keep
cp $D/progress.csv $D/config.json "$OUT/"
tar czf "$OUT/run.tar.gz" -C /tmp/ck --exclude='ckpt-*' --exclude='events.*' --exclude=train.lock $M
tail -4 "$OUT/console.log"
