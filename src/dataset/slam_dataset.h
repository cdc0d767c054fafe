// SLAM-Omni spoken-dialogue records -> training samples [G+1, L] by the rules of docs/spec/slam-omni.md
// ("One training sample"); the record schema, the truncation policy and the errors are in docs/dataset.md.
//   prompt  [P = 2 + np]   text: input_t, tokens("<SYSTEM>: {system_prompt}\n " + history), eot; audio: pad_a
//   input   [S = Q + 3]    text: input_t, Q x (pad_t | question/tts text ids), eot, answer_t (every task: the
//                          reference never uses the asr id); audio: input_a, Q x pad_a, eoa, answer_a; Q = T_s (300)
//                          when spoken
//   answer  [La]           text: answer ids, eot, pad_t..; audio: latency x pad_a, group layout of tokens + [eoa],
//                          then pad_a.. (asr: the record's target_token if any, else pad_a)
// Audio ids are shifted by +T (layer shift: +T+g*A) in input_ids; labels hold raw ids and -100 (prompt, input, and past the end of the
// shorter of text / audio in the answer; asr: every audio label, as the reference skips the audio loss for asr).
#pragma once
#include "dataset/dataset.h"
#include "dataset/slam_layout.h"
#include "dataset/slam_record.h"   // os_slam_task

// Open a SLAM-Omni dataset (JSONL or a JSON array): every record is read and checked now (errors name
// file:line:field), records with an empty answer are skipped and counted; text is tokenized when a sample is
// first requested, and the ids are cached. NULL + message on error.
os_dataset *os_slam_open(const char *path, const os_slam_config *c);
