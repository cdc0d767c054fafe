// omnishard infer's options settled, and its ranks stop together (infer_args.h).
#include "infer/infer_args.h"
#include "core/err.h"
#include "io/hfconfig.h"
#include "model/omni.h"
#include "zero/comm.h"
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int os_infer_failed(int rc) {
    int n = comm_any_failed(rc < 0);
    if (!n) return 0;
    if (rc < 0 && os_rank >= 0) fprintf(stderr, "omnishard infer: rank %d: %s\n", os_rank, os_errmsg());
    else if (rc < 0) fprintf(stderr, "omnishard infer: %s\n", os_errmsg());
    else if (comm_rank() == 0) fprintf(stderr, "omnishard infer: stopping: %d other rank(s) reported an error\n", n);
    return 1;
}

// the decoding options (the reference's inference recipe defaults: greedy, temperature 1, top_k 0, top_p 1,
// both repetition penalties 1.2); a sampling option off its default without --do_sample true is refused.
// --temperature 0 is greedy decoding, as ms-swift and transformers users write it (ms-swift turns do_sample off
// at temperature 0; the reference would divide by it): the other sampling options then change nothing, and a note
// says so.
static int settle_choice(const infer_args *a, os_gen_opts *g) {
    os_choice_opts *c = &g->choice;
    if (a->penalty && (a->text_penalty || a->audio_penalty))
        return os_errf("--repetition_penalty sets both penalties: give it, or --text_repetition_penalty/--audio_repetition_penalty");
    if (a->temperature > 0 && a->temperature < 1e-30)
        return os_errf("--temperature: expected 0 (greedy) or a value in [1e-30,3.4e38], got %g", a->temperature);
    c->do_sample = a->do_sample, c->temperature = a->temperature, c->top_k = a->top_k, c->top_p = a->top_p;
    g->text_penalty = a->penalty ? a->penalty : a->text_penalty ? a->text_penalty : 1.2;
    g->audio_penalty = a->penalty ? a->penalty : a->audio_penalty ? a->audio_penalty : 1.2;
    if (a->temperature == 0) {
        c->do_sample = 0;
        if (comm_rank() == 0)
            os_info("omnishard infer: note: --temperature 0: greedy decoding (each stream takes its argmax, as with "
                    "--do_sample false); --do_sample, --top_k, --top_p and --seed have no effect");
        return 0;
    }
    if (!c->do_sample) {
        const char *off = c->temperature != 1.0 ? "--temperature" : c->top_k ? "--top_k" : c->top_p != 1.0 ? "--top_p" : NULL;
        if (off) return os_errf("%s: only with --do_sample true (greedy takes the argmax)", off);
    }
    return 0;
}

static int exists(const char *dir, const char *name) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return access(path, F_OK) == 0;
}

// What --model is (a model directory, or a checkpoint of omnishard sft read directly), and the speech encoder:
// --speech_encoder, else the one the model's slam_omni.json records (as it was given to the training run). A
// recorded encoder that is not there is an error with --wav, and a note otherwise (text questions need none).
// 0, or -1 + message.
static int model_source(const infer_args *a, os_session_opts *so) {
    static char recorded[4096];
    if (!exists(a->model, "config.json") && exists(a->model, "logging.jsonl"))
        return os_errf("--model %s: a run directory of omnishard sft, not a model: give %s/final_model, or one of its "
                       "checkpoint-STEP directories", a->model, a->model);
    so->checkpoint = exists(a->model, "manifest.json");   // OUTPUT_DIR/checkpoint-STEP (persist/checkpoint.h)
    so->speech_encoder = a->speech_encoder;
    char path[4200];
    snprintf(path, sizeof path, "%s/slam_omni.json", a->model);
    os_omni_config oc;
    os_omni_config_default(&oc, 3);
    // (an unreadable slam_omni.json is reported by the session's own load of it)
    if (a->speech_encoder || os_omni_config_load(path, &oc) <= 0 || !oc.speech_encoder[0]) return 0;
    snprintf(recorded, sizeof recorded, "%s", oc.speech_encoder);
    if (exists(recorded, "config.json")) {
        so->speech_encoder = recorded;
        return 0;
    }
    if (a->wav)
        return os_errf("%s: field 'speech_encoder': the model was trained with the speech encoder '%s', which is not "
                       "there (moved, or a path relative to where training ran): give --speech_encoder DIR",
                       path, recorded);
    if (comm_rank() == 0)
        os_info("omnishard infer: note: the speech encoder the model was trained with ('%s', %s) is not there: "
                "text questions only (give --speech_encoder DIR for speech)", recorded, path);
    return 0;
}

int os_infer_settle(const infer_args *a, os_gen_opts *g, os_session_opts *so, int64_t *index, int nranks) {
    memset(g, 0, sizeof *g);
    g->max_new_tokens = a->max_new_tokens, g->seed = (uint64_t)a->seed, g->text_only = a->text_only, g->kv_cache = a->kv_cache;
    if (!a->model) return os_errf("--model DIR is required (omnishard infer --help)");
    if (os_hub_id_check("--model", a->model) < 0 || os_hub_id_check("--speech_encoder", a->speech_encoder) < 0) return -1;
    if (os_dataset_hub_id_check("--dataset", a->dataset, a->dataset) < 0) return -1;
    if (a->multi_round && (a->question || a->wav || a->dataset))
        return os_errf("--multi_round: the questions come from stdin, one per line (no --question/--wav/--dataset)");
    if (a->multi_round && a->task && strcmp(a->task, "s2s"))
        return os_errf("--multi_round: only with --task s2s (the reference keeps history for s2s only), got '%s'", a->task);
    if (!a->question && !a->wav && !a->dataset && !a->multi_round)
        return os_errf("give the question: --question TEXT, --wav FILE, --dataset FILE or --multi_round");
    if (a->dataset && (a->question || a->wav || a->task || a->system))
        return os_errf("--dataset: the record gives the question, task and system prompt (no --question/--wav/--task/--system_prompt)");
    if (a->index >= 0 && !a->dataset) return os_errf("--index: only with --dataset");
    if (a->output_file && (!a->dataset || a->index >= 0))
        return os_errf("--output_file: only with --dataset and without --index (every record is decoded)");
    if (a->resume && !a->output_file) return os_errf("--resume: only with --output_file");
    if (a->overwrite && !a->output_file) return os_errf("--overwrite: only with --output_file");
    if (a->batch > 1 && !a->output_file)
        return os_errf("--infer_batch_size %lld: only with --dataset and --output_file (a single answer is one "
                       "sequence)", (long long)a->batch);
    if (a->batch > 1 && !a->kv_cache)
        return os_errf("--infer_batch_size %lld: needs --kv_cache true (each sequence decodes from its own KV cache)",
                       (long long)a->batch);
    if (a->on_error && !a->output_file) return os_errf("--on_error: only with --output_file");
    if (a->speech_batch_size && !a->output_file) return os_errf("--speech_batch_size: only with --output_file");
    *index = a->index >= 0 ? a->index : 0;
    int zero = a->zero_stage >= 0 ? a->zero_stage : nranks > 1 ? 3 : 0;
    // a whole test set over several ranks: the records split, each rank decoding alone (whole models) or in lockstep
    g->local = a->output_file && nranks > 1 && zero < 3;
    g->lockstep = a->output_file && nranks > 1 && zero == 3;
    g->speech_batched = a->output_file != NULL;   // a test set: the spoken questions of many records at once
    if (settle_choice(a, g) < 0) return -1;
    // a SLAM-Omni model as slam_omni.json describes it, every bucket frozen (no gradients, no AdamW moments)
    *so = (os_session_opts){.model = a->model, .slam = 1, .code_layer = -1, .num_latency_tokens = -1,
                            .do_layershift = -1, .zero_stage = zero, .seed = 42, .frozen = 1};
    return model_source(a, so);
}
