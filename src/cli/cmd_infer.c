// omnishard infer: generate the text and audio tokens of an answer with a trained SLAM-Omni model (docs/inference.md).
#include "cli/commands.h"
#include "cli/device.h"
#include "core/device.h"
#include "infer/infer_run.h"
#include "core/err.h"
#include "core/opts.h"
#include "train/agree.h"
#include "train/args.h"
#include "zero/comm.h"
#include <stddef.h>
#include <stdio.h>

static const char USAGE[] =
    "usage: omnishard infer --model DIR (--question TEXT | --wav FILE | --dataset FILE [--index I] | --multi_round)\n"
    "       omnishard infer --model DIR --dataset FILE --output_file OUT.jsonl [--resume true]\n"
    "       [options]\n"
    "       mpirun -np N omnishard infer ... [--deepspeed zero3]\n"
    "\n"
    "Generates an answer (text + G layers of audio tokens) with a trained SLAM-Omni model and prints one JSON object\n"
    "on stdout: text, text_ids, audio (raw ids per layer), codec (the de-interleaved codec stream), ... (see\n"
    "docs/inference.md); with --output_file, one JSON line per record of --dataset. Greedy unless --do_sample true;\n"
    "the decoding defaults are SLAM-LLM's inference recipe's.\n";

#define F(n) .off = offsetof(infer_args, n)
#define NUM(nm, f, t, r, h) {.name = nm, F(f), .type = t, .range = r, .help = h}
static const os_opt OPTS[] = {
    {.name = "model", F(model), .type = OS_OPT_STR,
     .help = "a model directory as omnishard sft writes it (OUTPUT/final_model, omnishard export), or a checkpoint "
             "of a run (OUTPUT/checkpoint-STEP, read directly); required"},
    {.name = "question", F(question), .type = OS_OPT_STR,
     .help = "the user's question as text (text before its last \"<USER>:\" is history)"},
    {.name = "wav", F(wav), .type = OS_OPT_STR,
     .help = "the question spoken (needs the model's speech encoder); with --question: its transcript, unused"},
    {.name = "dataset", F(dataset), .type = OS_OPT_STR, .alias = "--val_dataset",
     .help = "a SLAM-Omni record file (JSONL/JSON, pretokenized) or a folder omnishard convert wrote; --index picks "
             "the record, whose prompt and question are built as for training (its answer is not used)"},
    NUM("index", index, OS_OPT_I64, "[0,inf)", "the record of --dataset (default 0)"),
    {.name = "output_file", F(output_file), .type = OS_OPT_STR, .alias = "--result_path",
     .help = "with --dataset: decode every record, one JSON line each in dataset order (key, index, line, task, stop, "
             "counts, seconds and the fields of a single answer) into this file, with progress and a summary on stderr; "
             "under mpirun the records are split over the ranks"},
    {.name = "resume", F(resume), .type = OS_OPT_BOOL,
     .help = "with --output_file: keep the records already written there (a partial last line is cut off) and decode "
             "the rest; refused when the file was begun with another model, dataset or decoding options (its "
             "settings file OUT.run.json says which; default false)"},
    {.name = "overwrite", F(overwrite), .type = OS_OPT_BOOL,
     .help = "with --output_file: decode anew into an existing omnishard infer output (a file that is not one is "
             "never replaced; default false: an existing non-empty file is refused, naming what it holds)"},
    {.name = "infer_batch_size", F(batch), .type = OS_OPT_I64, .range = "[1,256]", .alias = "--max_batch_size",
     /* 256: OS_GEN_MAX_BATCH, infer/gen_forward.h */
     .help = "with --output_file: decode B records at once, each with its own KV cache, stopping on its own (its slot "
             "then takes the next record); the same tokens as 1 at a time (default 1)"},
    {.name = "on_error", F(on_error), .type = OS_OPT_CHOICE, .choices = "stop|skip",
     .help = "with --output_file, a record that cannot be decoded (malformed JSON, wrong field types, an unreadable "
             "WAV, a prompt longer than max_position_embeddings), named by FILE:LINE: stop (default) writes the "
             "records before it and ends the run with exit 1 on every rank; skip writes an error line for it (key, "
             "index, line, error) and goes on"},
    NUM("speech_batch_size", speech_batch_size, OS_OPT_I64, "[1,65536]",
        "with --output_file: the spoken questions of up to N records per rank go through the Whisper encoder and the "
        "projector together, each encoder layer gathered once for them (default 8; the results are those of one at "
        "a time)"),
    {.name = "multi_round", F(multi_round), .type = OS_OPT_FLAG,
     .help = "a conversation: every line of stdin is a question (q: quit, c: clear the history, h: show it), "
             "answered after the history of the earlier rounds; one JSON object per round"},
    {.name = "speech_encoder", F(speech_encoder), .type = OS_OPT_STR,
     .help = "the Whisper encoder directory of a model trained with speech questions (default: the one its "
             "slam_omni.json records, as given to its training run)"},
    {.name = "system_prompt", F(system), .type = OS_OPT_STR, .help = "system prompt (default: the task's, as in training)"},
    {.name = "task", F(task), .type = OS_OPT_CHOICE, .choices = "s2s|tts|asr",
     .help = "with --question/--wav (default s2s); tts speaks --question; asr transcribes --wav"},
    NUM("max_new_tokens", max_new_tokens, OS_OPT_I64, "[1,2147483647]",
        "at most N generation steps (default 3000, the reference's inference recipe); each step adds one text token "
        "and G audio tokens (code_layer), and the reference's codec runs at 50 tokens a second, so N steps are at "
        "most N*G/50 s of speech: 180 s for the default at G = 3 (decoding that many can take minutes on a CPU; "
        "the progress is shown on stderr)"),
    {.name = "do_sample", F(do_sample), .type = OS_OPT_BOOL,
     .help = "false (default): greedy (argmax); true: sample (--temperature, --top_k, --top_p)"},
    NUM("temperature", temperature, OS_OPT_F64, "[0,3.4e38]",
        "sampling: softmax(logits / X) (default 1.0); 0: greedy decoding, as in ms-swift (the other sampling "
        "options then have no effect; positive values from 1e-30)"),
    NUM("top_k", top_k, OS_OPT_I64, "[0,inf)", "sampling among the K largest logits (default 0: all)"),
    NUM("top_p", top_p, OS_OPT_F64, "(0,1]", "sampling among the smallest set of largest logits with mass >= P (default 1.0)"),
    NUM("text_repetition_penalty", text_penalty, OS_OPT_F64, "(0,3.4e38]",
        "penalty on text ids generated before (default 1.2; 1: none)"),
    NUM("audio_repetition_penalty", audio_penalty, OS_OPT_F64, "(0,3.4e38]",
        "penalty on each audio layer's ids generated before (default 1.2; 1: none)"),
    NUM("repetition_penalty", penalty, OS_OPT_F64, "(0,3.4e38]", "both penalties at once"),
    NUM("seed", seed, OS_OPT_I64, "[0,inf)", "sampling seed (default 42)"),
    {.name = "kv_cache", F(kv_cache), .type = OS_OPT_BOOL,
     .help = "true (default): the prompt runs once, then one position per step (keys and values of earlier "
             "positions cached); false: the whole sequence again at every step"},
    {.name = "text_only", F(text_only), .type = OS_OPT_FLAG,
     .help = "predict no audio (audio rows pad_a), as the reference's decode_text_only"},
    NUM("zero_stage", zero_stage, OS_OPT_INT, "[0,3]", "ZeRO stage (default 3 under mpirun, else 0)"),
    {.name = "deepspeed", F(zero_stage), .type = OS_OPT_STAGE, .help = "zero0 | zero1 | zero2 | zero3 (same as --zero_stage)"},
    NUM("ddp_timeout", ddp_timeout, OS_OPT_F64, "[0,31536000]",
        "seconds a rank waits in one collective before every rank ends with a report naming the ranks that did not "
        "arrive (default 1800; 0: no deadline), as sft's"),
    {.name = "device", F(device), .type = OS_OPT_STR, .metavar = OS_DEVICE_VALUES,
     .help = "cpu (default), cuda (each rank the GPU of its local rank among those visible) or cuda:N; cuda needs a "
             "binary built with make CUDA=1 (docs/operations.md \"GPUs\"); guard or guard:lax: the test backend "
             "(docs/design.md \"The guard backend\")"},
    {.name = "tf32", F(tf32), .type = OS_OPT_BOOL,
     .help = "--device cuda: fp32 products in TF32 on the tensor cores (faster, not exact; default false)"},
    {.name = "show_prompt", F(show_prompt), .type = OS_OPT_FLAG, .per_rank = 1,
     .help = "add the prompt's input ids [G+1][P] to the output"},
};
#undef NUM
#undef F
#define NOPTS ((int)(sizeof OPTS / sizeof OPTS[0]))

// ms-swift's `swift infer` options omnishard's infer does not have: refused with what to pass instead, or noted when
// they change nothing here (docs/inference.md "ms-swift's infer spellings")
static const os_opt_known KNOWN[] = {
    {"adapters", "a checkpoint holds its base model and its LoRA adapter: pass --model OUTPUT_DIR/checkpoint-STEP "
                 "(read directly), or --model OUTPUT_DIR/final_model", 0},
    {"ckpt_dir", "pass the checkpoint as --model OUTPUT_DIR/checkpoint-STEP (read directly)", 0},
    {"stream", "on a terminal the text so far is shown on stderr while it is generated (a progress line every 5 s in "
               "a log); the answer's JSON is printed when it ends", 1},
    {"infer_backend", "the answer is generated by omnishard's own forward with a KV cache (--kv_cache); no vLLM, "
                      "SGLang or LMDeploy engine is used", 1},
};

int cmd_infer(int argc, char **argv) {
    infer_args a = {.index = -1, .max_new_tokens = 3000, .seed = 42, .batch = 1, .temperature = 1.0, .top_p = 1.0, .kv_cache = 1,
                    .zero_stage = -1, .device = "cpu", .ddp_timeout = OS_DDP_TIMEOUT_DEFAULT};
    const os_opt_group grp = {.title = "options", .opts = OPTS, .n = NOPTS, .obj = &a};
    unsigned char noted[sizeof KNOWN / sizeof KNOWN[0]] = {0};
    const os_opt_cmd c = {.command = "infer", .usage = USAGE, .groups = &grp, .ngroups = 1, .known = KNOWN,
                          .nknown = (int)(sizeof KNOWN / sizeof KNOWN[0]), .known_given = noted};
    int rc = os_opts_parse(&c, argc, argv);
    if (rc == 1) return os_opts_usage(&c, stdout), 0;
    // the device before MPI starts (each rank its GPU by the launcher's local rank); inference runs fp32
    if (rc == 0 && os_tf32_check(a.tf32, a.device, 0) == 0) rc = os_cli_device_open(a.device, a.tf32, 0);
    else if (rc == 0) rc = -1;
    if (rc < 0) return fprintf(stderr, "omnishard infer: %s\n", os_errmsg()), 2;
    comm_set_timeout(a.ddp_timeout);   // bounds MPI_Init and every collective after it
    comm_init(&argc, &argv);
    if (comm_rank() == 0) os_opts_known_notes(KNOWN, c.nknown, noted, "infer");   // ms-swift's, changing nothing here
    os_gen_opts g;
    os_session_opts so;
    int64_t index = 0;
    if (os_infer_failed(os_infer_settle(&a, &g, &so, &index, comm_size()))) {
        comm_finalize();
        return 2;
    }
    // every rank needs the same options (else the ranks run different forwards and wait on each other)
    rc = os_infer_failed(os_agree_table(OPTS, NOPTS, &a, NULL, NULL, 0)) ? 1 : os_infer_run(&a, &g, &so, index);
    os_cli_device_report();
    comm_finalize();
    return rc;
}
