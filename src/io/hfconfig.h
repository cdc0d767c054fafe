// Hugging Face config.json readers: Qwen2 (LLM) and Whisper (speech encoder).
#pragma once

typedef struct {
    char model_type[32];
    int hidden_size, intermediate_size, num_hidden_layers, num_attention_heads, num_key_value_heads, head_dim,
        vocab_size, max_position_embeddings, tie_word_embeddings;
    double rms_norm_eps, rope_theta;
    char torch_dtype[16];
    int bos_token_id, eos_token_id;   // -1 when absent or null
} os_qwen2_config;

// Reads a Qwen2 config.json. Defaults as transformers' Qwen2Config; rejects what we do not implement
// (rope_scaling, sliding window, hidden_act != silu). 0, or -1 + "PATH: field 'X': ..." message.
int os_qwen2_config_load(const char *path, os_qwen2_config *c);
// Writes a fresh config.json (Qwen2ForCausalLM, float32) from c; vocab_size_override > 0 replaces vocab_size.
int os_qwen2_config_write(const char *path, const os_qwen2_config *c, int vocab_size_override);
// Copies src_path's JSON (keeping every extra field), sets vocab_size (when > 0) and torch_dtype / dtype (the
// tensors' dtype: "float32", "bfloat16", "float16"; NULL: "float32"), and writes dst_path atomically. src is
// validated by os_qwen2_config_load first.
int os_qwen2_config_rewrite(const char *src_path, const char *dst_path, int new_vocab_size, const char *dtype);

typedef struct {
    int d_model, encoder_layers, encoder_attention_heads, encoder_ffn_dim, num_mel_bins, max_source_positions;
} os_whisper_config;
// Reads a HF WhisperConfig config.json (activation_function must be "gelu").
int os_whisper_config_load(const char *path, os_whisper_config *c);

// A model directory option (--model, --speech_encoder): 0 when dir exists (or is not a Hub id); -1 + message when it
// does not and reads like a Hugging Face Hub id ("Qwen/Qwen2.5-7B"): nothing is ever downloaded; how to get it.
int os_hub_id_check(const char *option, const char *dir);
// A dataset option (--dataset, --val_dataset) of spec (as given: PATH#N) whose file is path: 0 when path exists (or is
// not a Hub id); -1 + message when it does not and reads like a Hub dataset id ("org/name", ms-swift's "org/name:subset"
// too): the download and `omnishard convert` commands that make it a local dataset.
int os_dataset_hub_id_check(const char *option, const char *spec, const char *path);

// A model directory option after os_hub_id_check: 0 when dir is a directory holding config.json; -1 + message naming
// the option, what is missing, what a model directory holds and how to get one (huggingface-cli download ...).
// missing_file: a file known to be missing from dir (tokenizer.json), checked instead of config.json.
int os_model_dir_check(const char *option, const char *dir, const char *missing_file);
