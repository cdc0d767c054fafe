#!/usr/bin/env bash
# Demo: a tiny random SLAM-Omni model trained for a few epochs on 2 MPI ranks with ZeRO-3, on a generated
# SLAM-Omni dataset (text questions, answer text + codec tokens; docs/dataset.md), 10% held out for evaluation;
# then the loss curves drawn as SVG.
set -euo pipefail
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
BIN=${OMNISHARD_BUILD:-build}/omnishard
mkdir -p demo
.venv/bin/python tools/make_tiny_model.py demo/model demo/data.jsonl --samples 48
head -c 300 demo/data.jsonl; echo " ..."
mpirun --oversubscribe --bind-to none -np 2 -x OMP_NUM_THREADS=1 "$BIN" sft \
    --model demo/model --dataset demo/data.jsonl --output_dir demo/out --overwrite_output_dir true \
    --deepspeed zero3 --num_train_epochs 4 --learning_rate 3e-3 --warmup_steps 2 --lr_scheduler_type cosine \
    --per_device_train_batch_size 2 --max_length 256 --split_dataset_ratio 0.1 --eval_steps 5 --save_steps 10
"$BIN" plot demo/out/logging.jsonl -o demo/out/loss.svg
echo "logging: demo/out/logging.jsonl   plot: demo/out/loss.svg, demo/out/images/   checkpoints: demo/out/checkpoint-*   model: demo/out/final_model"
