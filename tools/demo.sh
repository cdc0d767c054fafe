#!/usr/bin/env bash
# Demo: a tiny random SLAM-Omni model trained for a few steps on 2 MPI ranks with ZeRO-3.
set -euo pipefail
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p demo
.venv/bin/python tools/make_tiny_model.py demo/model demo/data.jsonl
mpirun --oversubscribe --bind-to none -np 2 -x OMP_NUM_THREADS=1 ${OMNISHARD_BUILD:-build}/omnishard sft \
    --model demo/model --dataset demo/data.jsonl --output_dir demo/out \
    --deepspeed zero3 --num_train_epochs 2 --learning_rate 1e-3 --warmup_steps 2 --lr_scheduler_type cosine \
    --per_device_train_batch_size 2 --max_length 64 --save_steps 10
echo "logging: demo/out/logging.jsonl   model: demo/out/final_model"
