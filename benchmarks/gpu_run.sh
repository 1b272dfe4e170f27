#!/usr/bin/env bash
# The GPU run in one command (at most 9 minutes): environment, smoke step, comparison with
# nn.Transformer, the base model trained on Multi30k in a time budget, test2016 greedy and beam 4.
#
#   benchmarks/gpu_run.sh OUT [options of python -m benchmarks.gpu_profile]
#
# OUT receives, as they are produced: env.txt, gpu_profile.log, <gpu>.partial.json after each
# phase, then <gpu>.json, <gpu>-loss.png and the run's log.jsonl. Wheels in .whl/ (Babel, on the
# device machine) are installed into /tmp/site first; the data folder is $DATA (default
# .data/multi30k). Rehearse on a CPU with:
#   DATA=../shared/data/multi30k benchmarks/gpu_run.sh /tmp/gpu-rehearsal --preset tiny \
#       --time-budget 120 --reserve 40 --train-size 2000 --eval-sentences 100
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: benchmarks/gpu_run.sh OUT [gpu_profile options]}
shift
mkdir -p "$out"
if compgen -G ".whl/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        || exit 1
    export PYTHONPATH="/tmp/site:$PWD"
fi
{
    date -u
    git rev-parse --short HEAD 2>/dev/null || echo "no git commit"
    command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
    python3 -c "import torch, sacrebleu, tokenizers; print('torch', torch.__version__, 'cuda', torch.version.cuda,
'gpu', torch.cuda.get_device_name() if torch.cuda.is_available() else None, 'sacrebleu', sacrebleu.__version__)"
} 2>&1 | tee "$out/env.txt"
# 540 s is the command's own budget; timeout is the backstop that still leaves time to copy the files.
PYTHONUNBUFFERED=1 TQDM_DISABLE=1 timeout 570 python3 -m benchmarks.gpu_profile \
    --data-dir "${DATA:-.data/multi30k}" --run-dir /tmp/gpu_run --out "$out" "$@" 2>&1 | tee "$out/gpu_profile.log"
status=${PIPESTATUS[0]}
cp /tmp/gpu_run/log.jsonl "$out/log.jsonl" 2>/dev/null
echo "gpu_profile exit status: $status" | tee -a "$out/gpu_profile.log"
exit "$status"
