"""Run directories and their logs (issue 27): a used --output_dir is refused (naming what it holds) unless the run
resumes its checkpoint or --overwrite_output_dir true removes the earlier run first; --add_version writes into new
vN-... folders; args.json holds the resolved settings; the ETA of a resumed run counts only its own steps."""
import json, os, re
import pytest

from oracle import slam_omni_ref as ref
from omni_run import run


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    d = tmp_path_factory.mktemp("runs")
    ref.make_model(str(d / "model"), hidden=16, layers=1, heads=2, kv_heads=1, inter=32, T=128, A=64, G=3, seed=2)
    ref.make_data(str(d / "data.jsonl"), 6, G=3, T=128, A=64, seed=3)
    return d


def sft(d, out, *extra, check=True, data="data.jsonl"):
    return run(["sft", "--model", d / "model", "--dataset", d / data, "--output_dir", out, "--max_length", 64,
                *extra], check=check)


def lines(out):
    return [json.loads(l) for l in open(out / "logging.jsonl")]


def test_eta_after_resume_counts_this_runs_steps(tiny, tmp_path):
    """remaining = elapsed / (steps this run) * (steps left): the invariant of a constant pace; before the fix the
    resumed run divided by the absolute step (step 3 of a run resumed at 2: 1/3 of the estimate)"""
    out = tmp_path / "o"
    sft(tiny, out, "--max_steps", 2, "--save_steps", 2)
    p = sft(tiny, out, "--max_steps", 6, "--resume_from_checkpoint", out / "checkpoint-2")
    after = [l for l in lines(out) if l["step"] > 2]
    assert [l["step"] for l in after] == [3, 4, 5, 6]
    for l in after:
        want = l["time/elapsed_s"] / (l["step"] - 2) * (6 - l["step"])
        assert l["time/remaining_s"] == pytest.approx(want, rel=1e-6, abs=1e-9), l
    etas = re.findall(r"step (\d+)/6 .* remaining_time (\S+(?: \S+)*)$", p.stderr, re.M)
    assert [s for s, _ in etas] == ["3", "4", "5", "6"] and etas[-1][1] == "0s", p.stderr
    assert all(re.fullmatch(r"(\d+d )?(\d+h )?(\d+m )?\d+s", e) for _, e in etas), etas


def test_a_used_output_dir_is_refused_naming_what_it_holds(tiny, tmp_path):
    out = tmp_path / "o"
    sft(tiny, out, "--max_steps", 4, "--save_steps", 2)
    before = (out / "logging.jsonl").read_text()
    p = sft(tiny, out, "--max_steps", 1, check=False)
    assert p.returncode != 0, p.stderr
    assert "the output directory holds an earlier run: args.json, checkpoint-2, checkpoint-4, final_model, " \
           "images, logging.jsonl;" in p.stderr and "--overwrite_output_dir true" in p.stderr, p.stderr
    assert f"--resume_from_checkpoint {out}/checkpoint-4" in p.stderr, p.stderr
    assert (out / "logging.jsonl").read_text() == before      # untouched (was: truncated to the new run's lines)
    # a resumed run writes only into its checkpoint's directory (or an empty one), never into another run's
    other = tmp_path / "other"
    sft(tiny, other, "--max_steps", 1)
    p = sft(tiny, other, "--max_steps", 4, "--resume_from_checkpoint", out / "checkpoint-2", check=False)
    assert p.returncode != 0 and "earlier run: args.json, checkpoint-1, final_model, images, logging.jsonl;" in p.stderr, p.stderr
    p = sft(tiny, out, "--max_steps", 4, "--resume_from_checkpoint", out / "checkpoint-2",
            "--overwrite_output_dir", "true", check=False)
    assert p.returncode != 0 and "would remove the checkpoint this run resumes" in p.stderr, p.stderr
    assert sorted(os.listdir(out)) == [".omnishard.lock", "args.json", "checkpoint-2", "checkpoint-4", "final_model",
                                       "images", "logging.jsonl", "omnishard-files.json"]


def test_overwrite_removes_the_earlier_run_and_keeps_other_files(tiny, tmp_path):
    out = tmp_path / "o"
    sft(tiny, out, "--max_steps", 4, "--save_steps", 2)
    (out / "notes.txt").write_text("mine")
    p = sft(tiny, out, "--max_steps", 1, "--overwrite_output_dir", "true")
    assert "removed the earlier run's args.json, checkpoint-2, checkpoint-4, final_model, images, logging.jsonl" in p.stderr
    assert "kept notes.txt" in p.stderr, p.stderr
    assert sorted(os.listdir(out)) == [".omnishard.lock", "args.json", "checkpoint-1", "final_model", "images",
                                       "logging.jsonl", "notes.txt", "omnishard-files.json"]
    assert [l["step"] for l in lines(out)] == [1]


def tree(d):
    """{relative path: bytes} of every file under d (directories as None), but the lock (it names the last holder)"""
    out = {}
    for root, dirs, files in os.walk(d):
        for n in dirs:
            out[os.path.relpath(os.path.join(root, n), d)] = None
        for n in files:
            if n != ".omnishard.lock":
                out[os.path.relpath(os.path.join(root, n), d)] = open(os.path.join(root, n), "rb").read()
    return out


def test_overwrite_removes_only_what_omnishard_wrote(tiny, tmp_path):
    """--overwrite_output_dir true removes only the entries the run's omnishard-files.json proves omnishard wrote
    (listed, size and checksum unchanged): a Hugging Face Trainer's checkpoint-500/ (a name omnishard writes) stops
    the run before anything is touched, naming it; a user's images/ and notes.txt are kept and named (before, all
    three went as "the earlier run's" by their names)"""
    out = tmp_path / "o"
    sft(tiny, out, "--max_steps", 4, "--save_steps", 2)
    hf = out / "checkpoint-500"
    hf.mkdir()
    (hf / "trainer_state.json").write_text('{"global_step": 500}')
    (hf / "model.safetensors").write_bytes(b"\0" * 4096)
    (out / "images").mkdir(exist_ok=True)   # (the run drew its charts there: one of them changed, it is the user's)
    (out / "images" / "train_loss.png").write_bytes(b"\x89PNG mine")
    (out / "notes.txt").write_text("mine")
    before = tree(out)
    p = sft(tiny, out, "--max_steps", 1, "--overwrite_output_dir", "true", check=False)
    assert p.returncode != 0, p.stderr
    assert f"{out}: checkpoint-500 (not listed in omnishard-files.json) is in the way of what this run writes, and " \
           "omnishard cannot prove it wrote it" in p.stderr and "nothing was touched" in p.stderr, p.stderr
    assert tree(out) == before
    os.rename(hf, tmp_path / "checkpoint-500")
    # a file of the earlier run changed since: not proven either
    (out / "final_model" / "config.json").write_text((out / "final_model" / "config.json").read_text() + " ")
    p = sft(tiny, out, "--max_steps", 1, "--overwrite_output_dir", "true", check=False)
    assert p.returncode != 0 and "final_model (holds config.json:" in p.stderr, p.stderr
    os.rename(out / "final_model", tmp_path / "final_model.edited")
    p = sft(tiny, out, "--max_steps", 1, "--overwrite_output_dir", "true")
    assert "removed the earlier run's args.json, checkpoint-2, checkpoint-4, logging.jsonl from" in p.stderr, p.stderr
    assert f"kept images, notes.txt in {out}" in p.stderr, p.stderr
    after = tree(out)
    assert after["images/train_loss.png"] == b"\x89PNG mine" and after["notes.txt"] == b"mine"
    assert sorted(os.listdir(out)) == [".omnishard.lock", "args.json", "checkpoint-1", "final_model", "images",
                                       "logging.jsonl", "notes.txt", "omnishard-files.json"]
    assert [l["step"] for l in lines(out)] == [1]


def test_a_directory_without_the_manifest_is_foreign(tiny, tmp_path):
    """An output directory with no omnishard-files.json holds nothing omnishard can prove it wrote: a run's files
    there (an older omnishard's, or copied by hand) are in the way, with or without --overwrite_output_dir"""
    out = tmp_path / "o"
    sft(tiny, out, "--max_steps", 2, "--save_steps", 2)
    os.remove(out / "omnishard-files.json")
    before = tree(out)
    for extra in ([], ["--overwrite_output_dir", "true"]):
        p = sft(tiny, out, "--max_steps", 1, *extra, check=False)
        assert p.returncode != 0 and "args.json (no omnishard-files.json), checkpoint-2 (no omnishard-files.json)" \
            in p.stderr and "nothing was touched" in p.stderr, p.stderr
        assert tree(out) == before
    # resuming its own checkpoint still works (the directory is the checkpoint's run), and starts the record
    sft(tiny, out, "--max_steps", 3, "--resume_from_checkpoint", out / "checkpoint-2")
    assert [l["step"] for l in lines(out)] == [1, 2, 3] and (out / "omnishard-files.json").exists()


def test_a_failed_start_leaves_nothing_behind(tiny, tmp_path):
    """A start-up failure (a --logging_dir that cannot be created) removes what the run created, so the corrected
    command runs without --overwrite_output_dir (before, its empty logging.jsonl made the directory "used")"""
    out = tmp_path / "o"
    (tmp_path / "afile").write_text("x")
    p = sft(tiny, out, "--max_steps", 1, "--report_to", "tensorboard", "--logging_dir", tmp_path / "afile" / "tb",
            check=False)
    assert p.returncode != 0 and "afile" in p.stderr, p.stderr
    assert sorted(os.listdir(out)) == [".omnishard.lock"]
    sft(tiny, out, "--max_steps", 1, "--report_to", "tensorboard", "--logging_dir", tmp_path / "tb")
    assert [l["step"] for l in lines(out)] == [1]


def test_add_version_writes_each_run_into_a_new_folder_with_args_json(tiny, tmp_path):
    out = tmp_path / "o"
    sft(tiny, out, "--max_steps", 1, "--add_version", "true", "--learning_rate", "3e-4")
    run(["sft", "--model", tiny / "model", "--dataset", tiny / "data.jsonl", "--output_dir", out, "--max_length", 64,
         "--max_steps", 2, "--add_version", "true", "--deepspeed", "zero3"], np_=2)
    runs = sorted(os.listdir(out), key=lambda v: int(v[1:].split("-")[0]))
    assert len(runs) == 2 and all(re.fullmatch(r"v%d-\d{8}-\d{6}" % i, v) for i, v in enumerate(runs)), runs   # v0 first
    for v, steps in zip(runs, (1, 2)):
        assert [l["step"] for l in lines(out / v)] == list(range(1, steps + 1))
        a = json.load(open(out / v / "args.json"))
        assert a["output_dir"] == str(out / v) and a["max_steps"] == steps and a["add_version"] is True
        assert a["resolved"]["total_steps"] == steps and a["resolved"]["world_size"] == (1 if steps == 1 else 2)
    a1 = json.load(open(out / runs[0] / "args.json"))
    # every option, typed; the ones the model decides as resolved (code_layer was not given: the model's G = 3)
    assert a1["learning_rate"] == 3e-4 and a1["seed"] == 42 and a1["gradient_checkpointing"] is True
    assert a1["code_layer"] == 3 and a1["loss_weights"] == [0.25] * 4 and a1["val_dataset"] is None
    assert a1["resolved"]["train_samples"] == 6 and a1["resolved"]["resumed_from"] is None
    assert a1["model"] == str(tiny / "model") and a1["deepspeed"] == "zero0"


def test_spoken_question_without_speech_encoder_is_found_at_open(tmp_path):
    """A mixed dataset whose only spoken question is its last record: named FILE:LINE before the first step (was:
    'sample N' when first drawn, at step 21 of 49 in the issue)"""
    import wave
    from oracle import slam_samples_ref as sref
    sref.make_model_dir(str(tmp_path / "model"), T=512, A=80, G=3, hidden=16, layers=1, heads=2, kv_heads=1, inter=32)
    with wave.open(str(tmp_path / "q.wav"), "wb") as w:
        w.setnchannels(1), w.setsampwidth(2), w.setframerate(16000), w.writeframes(b"\0\0" * 1600)
    recs = sref.make_records(6, A=80, seed=4)
    recs[-1]["source_wav"] = "q.wav"
    sref.write_jsonl(tmp_path / "d.jsonl", recs)
    p = run(["sft", "--model", tmp_path / "model", "--dataset", tmp_path / "d.jsonl", "--output_dir", tmp_path / "o",
             "--max_steps", 5, "--max_length", 512], check=False)
    assert p.returncode != 0, p.stderr
    assert f"{tmp_path}/d.jsonl:6: field 'source_wav': the record has a spoken question ('q.wav') but the model has " \
           "no speech encoder (--speech_encoder DIR" in p.stderr, p.stderr
    assert not (tmp_path / "o" / "logging.jsonl").exists()      # before any step


DURATION = r"(\d+d )?(\d+h )?(\d+m )?\d+s"


def test_logging_steps_window_means_and_ms_swift_keys(tiny, tmp_path):
    """--logging_steps 3: the logged loss (and each term's loss and accuracy, and acc) is the mean of the window's
    per-step values, as transformers' Trainer logs its loss (its sum since the last log / the steps since); the
    reference is the same run logged every step (logging changes no number). ms-swift's keys beside ours."""
    every, window = tmp_path / "every", tmp_path / "window"
    sft(tiny, every, "--max_steps", 7, "--learning_rate", "3e-3")
    p = sft(tiny, window, "--max_steps", 7, "--learning_rate", "3e-3", "--logging_steps", 3)
    e, w = lines(every), lines(window)
    assert [l["step"] for l in w] == [3, 6, 7]
    terms = ["loss", "acc", "text_loss", "text_acc"] + [f"audio_{k}_{i}" for k in ("loss", "acc") for i in range(3)]
    for l, steps in zip(w, ([1, 2, 3], [4, 5, 6], [7])):
        for k in terms:
            want = sum(e[s - 1][k] for s in steps) / len(steps)
            assert l[k] == pytest.approx(want, rel=1e-7), (k, l["step"], l[k], want)
        last = e[steps[-1] - 1]
        assert l["grad_norm"] == last["grad_norm"] and l["lr"] == last["lr"] == l["learning_rate"]
    for l in e:   # acc: all target tokens of the step, so it lies between the terms' accuracies
        accs = [l["text_acc"]] + [l[f"audio_acc_{i}"] for i in range(3)]
        assert min(accs) - 1e-12 <= l["acc"] <= max(accs) + 1e-12, l
    for l in w:
        assert l["global_step/max_steps"] == f"{l['step']}/7" and l["percentage"] == f"{100 * l['step'] / 7:.2f}%"
        rss = l["peak_rss_gb"] * 1e9 / 2 ** 30   # read a little later in the step: the peak only grows
        assert 0.9 * rss <= l["memory(GiB)"] <= rss * (1 + 1e-8), (l["memory(GiB)"], rss)
        assert l["train_speed(iter/s)"] == pytest.approx(l["step"] / l["time/elapsed_s"], rel=1e-6)
        assert re.fullmatch(DURATION, l["elapsed_time"]) and re.fullmatch(DURATION, l["remaining_time"]), l
        assert 0 < l["epoch"] <= 2
    # the console line carries the same keys, once per logged step
    con = re.findall(r"^step (\d+)/7 \(([\d.]+)%\)  loss ([\d.]+)  token_acc ([\d.]+)  grad_norm \S+  learning_rate \S+  "
                     r"memory\(GiB\) [\d.]+  train_speed\(iter/s\) \S+  epoch [\d.]+  \d+ tok/s  elapsed_time .*s  "
                     r"remaining_time .*s$", p.stderr, re.M)
    assert [int(c[0]) for c in con] == [3, 6, 7], p.stderr
    assert float(con[0][2]) == pytest.approx(w[0]["loss"], abs=1e-4), con
    # ms-swift's console key: token_acc, the logged token_acc (= acc) of the same step
    assert [float(c[3]) for c in con] == [pytest.approx(l["token_acc"], abs=1e-4) for l in w], con


def png_pixels(svg, png):
    """svg rendered to png by cairosvg (at its own size); the pixels as rows of (r, g, b)"""
    import cairocffi, cairosvg
    cairosvg.svg2png(url=str(svg), write_to=str(png))
    surf = cairocffi.ImageSurface.create_from_png(str(png))
    w, h, stride, data = surf.get_width(), surf.get_height(), surf.get_stride(), bytes(surf.get_data())
    # ARGB32 in native (little-endian) order: B, G, R, A per pixel; the picture is opaque (a white background)
    return [[(data[y * stride + 4 * x + 2], data[y * stride + 4 * x + 1], data[y * stride + 4 * x]) for x in range(w)]
            for y in range(h)]


def near(c, rgb, tol=40):
    return all(abs(a - b) <= tol for a, b in zip(c, rgb))


def check_curves(pix, xs, ys, sm, py):
    """a 640 x 400 chart: at each logged step the dark curve (#1f77b4) where sm says, and only there; the light one
    (#aec7e8) where ys says wherever the two are apart (sm None: the values alone, dark, and nothing light)"""
    assert len(pix) == 400 and len(pix[0]) == 640
    px = lambda s: 70 + (s - xs[0]) / (xs[-1] - xs[0]) * 550
    def at(x, vals):   # a polyline's pixel row at pixel column x (its centre), between the logged steps
        step = xs[0] + (x + 0.5 - 70) / 550 * (xs[-1] - xs[0])
        k = max(i for i in range(len(xs) - 1) if xs[i] <= step) if step < xs[-1] else len(xs) - 2
        t = (step - xs[k]) / (xs[k + 1] - xs[k])
        return py(vals[k] + t * (vals[k + 1] - vals[k]))
    dark_vals = sm if sm is not None else ys
    for s in xs:
        x = min(max(round(px(s)), 71), 618)   # a line ends at its last point: the column just inside
        col = [row[x] if 40 <= y <= 350 else (255, 255, 255) for y, row in enumerate(pix)]   # the plot area
        dark = [y for y, c in enumerate(col) if near(c, (0x1f, 0x77, 0xb4))]
        assert dark and min(abs(y + 0.5 - at(x, dark_vals)) for y in dark) <= 2, (s, at(x, dark_vals), dark)
        assert all(abs(y + 0.5 - at(x, dark_vals)) <= 6 for y in dark), (s, dark, at(x, dark_vals))   # one curve
        light = [y for y, c in enumerate(col) if near(c, (0xae, 0xc7, 0xe8), 20)]
        if sm is None:   # (an anti-aliased edge of the dark curve may come close to the light colour)
            assert not [y for y in light if abs(y + 0.5 - at(x, ys)) > 3], (s, light)
        elif abs(at(x, ys) - at(x, sm)) > 6:   # the light curve where it is not under the dark one
            assert light and min(abs(y + 0.5 - at(x, ys)) for y in light) <= 2, (s, at(x, ys), light)


def test_plot_draws_one_smoothed_chart_per_metric(tiny, tmp_path):
    """images/ holds a chart per metric; looked at as a picture (rendered to PNG): at each logged step the dark
    curve lies where ms-swift's smoothing of the logged values says (the frame: x from the first to the last step
    over pixels 70..620, y the values' range plus 5% each side over pixels 350..40), the light one where the
    values are; the step ticks are whole numbers"""
    out = tmp_path / "o"
    sft(tiny, out, "--max_steps", 12, "--learning_rate", "1e-2", "--split_dataset_ratio", 0.34, "--eval_steps", 4)
    p = run(["plot", out / "logging.jsonl"])
    img = out / "images"
    names = sorted(f.name for f in img.iterdir())
    want = ["train_loss", "train_text_loss", "train_acc", "train_text_acc", "train_learning_rate", "train_grad_norm",
            "train_memory(GiB)", "eval_loss", "eval_text_loss", "eval_text_acc"] + \
           [f"{s}_audio_{k}_{i}" for s in ("train", "eval") for k in ("loss", "acc") for i in range(3)]
    assert names == sorted(n + e for n in want for e in (".png", ".svg")), names
    assert f"charts -> {img}/" in p.stderr, p.stderr
    steps = [l for l in lines(out) if "loss" in l]
    xs, ys = [l["step"] for l in steps], [l["loss"] for l in steps]
    sm = [ys[0]]
    for y in ys[1:]:
        sm.append(0.9 * sm[-1] + 0.1 * y)
    lo, hi = min(ys), max(ys)
    y0, y1 = lo - 0.05 * (hi - lo), hi + 0.05 * (hi - lo)
    px = lambda s: 70 + (s - xs[0]) / (xs[-1] - xs[0]) * 550
    py = lambda v: 40 + 310 - (v - y0) / (y1 - y0) * 310
    pix = png_pixels(img / "train_loss.svg", tmp_path / "train_loss.png")
    check_curves(pix, xs, ys, sm, py)
    # nothing of the curve outside the plot area (left of step 1, right of the last step)
    assert not any(near(row[x], (0x1f, 0x77, 0xb4)) for row in pix for x in (60, 630))
    import xml.etree.ElementTree as ET
    ns = "{http://www.w3.org/2000/svg}"
    ticks = [t.text for t in ET.parse(img / "train_loss.svg").getroot().iter(ns + "text")
             if t.get("text-anchor") == "middle" and t.get("y") and float(t.get("y")) == 40 + 310 + 16]
    assert ticks and all(re.fullmatch(r"\d+", t) for t in ticks) and len(set(ticks)) == len(ticks), ticks
    # an evaluation chart: its points where the values are
    ev = [l for l in lines(out) if "eval_loss" in l]
    assert [l["step"] for l in ev] == [4, 8, 12]
    pix = png_pixels(img / "eval_loss.svg", tmp_path / "eval_loss.png")
    vals = [l["eval_loss"] for l in ev]
    lo, hi = min(vals), max(vals)
    e0, e1 = lo - 0.05 * (hi - lo), hi + 0.05 * (hi - lo)
    for l in ev:
        x, y = 70 + (l["step"] - 4) / 8 * 550, 350 - (l["eval_loss"] - e0) / (e1 - e0) * 310
        assert near(pix[round(y)][round(x)], (0xd6, 0x27, 0x28)), (l, x, y)


def png_decode(path):
    """a PNG file's pixels as rows of (r, g, b), read with zlib and struct alone (the PNG specification: chunks, an
    8-bit palette or RGB image, each row's filter undone)"""
    import struct, zlib
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    k, idat, plte = 8, b"", None
    while k < len(data):
        n, kind = struct.unpack(">I4s", data[k:k + 8])
        body = data[k + 8:k + 8 + n]
        assert struct.unpack(">I", data[k + 8 + n:k + 12 + n])[0] == zlib.crc32(kind + body), kind
        if kind == b"IHDR":
            w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and ctype in (2, 3) and interlace == 0
        elif kind == b"PLTE":
            plte = [tuple(body[i:i + 3]) for i in range(0, n, 3)]
        elif kind == b"IDAT":
            idat += body
        k += n + 12
    bpp = 1 if ctype == 3 else 3
    raw, rows, prev = zlib.decompress(idat), [], bytes(w * bpp)
    for y in range(h):
        f, line = raw[y * (w * bpp + 1)], bytearray(raw[y * (w * bpp + 1) + 1:(y + 1) * (w * bpp + 1)])
        for i in range(len(line)):
            a, b, c = line[i - bpp] if i >= bpp else 0, prev[i], prev[i - bpp] if i >= bpp else 0
            p = a + b - c
            pred = [0, a, b, (a + b) // 2,
                    a if abs(p - a) <= abs(p - b) and abs(p - a) <= abs(p - c) else b if abs(p - b) <= abs(p - c) else c][f]
            line[i] = (line[i] + pred) & 255
        prev = bytes(line)
        rows.append([plte[v] for v in line] if ctype == 3 else [tuple(line[i:i + 3]) for i in range(0, len(line), 3)])
    return rows


def test_sft_writes_png_charts_with_only_the_losses_smoothed(tiny, tmp_path):
    """at the end of sft, images/ holds ms-swift's PNG charts: train_loss.png with the dark curve at ms-swift's
    smoothing of the logged losses and the light one at the values; train_learning_rate.png with the rate as logged
    (a warm-up then a decay, whose smoothing would lag far behind) and no smoothed curve"""
    out = tmp_path / "o"
    p = sft(tiny, out, "--max_steps", 12, "--learning_rate", "1e-2", "--warmup_steps", 4, "--save_steps", 0)
    assert f"charts of logging.jsonl written to {out}/images/" in p.stderr, p.stderr
    steps = [l for l in lines(out) if "loss" in l]
    xs = [l["step"] for l in steps]
    for key, smooth in (("loss", True), ("learning_rate", False)):
        ys = [l[key] for l in steps]
        sm = [ys[0]]
        for y in ys[1:]:
            sm.append(0.9 * sm[-1] + 0.1 * y)
        lo, hi = min(ys), max(ys)
        y0, y1 = lo - 0.05 * (hi - lo), hi + 0.05 * (hi - lo)
        pix = png_decode(out / "images" / f"train_{key}.png")
        assert pix[5][5] == (255, 255, 255)
        check_curves(pix, xs, ys, sm if smooth else None, lambda v: 40 + 310 - (v - y0) / (y1 - y0) * 310)
        if not smooth:   # the smoothing would have been drawn far from the logged rate; the SVG says the same
            assert max(abs(a - b) for a, b in zip(ys, sm)) > 0.3 * (hi - lo)
            svg = png_pixels(out / "images" / f"train_{key}.svg", tmp_path / "lr.png")
            check_curves(svg, xs, ys, None, lambda v: 40 + 310 - (v - y0) / (y1 - y0) * 310)
    assert (out / "images" / "train_loss.svg").exists()


def test_version_token_acc_and_the_closing_summary(tiny, tmp_path):
    """omnishard --version and args.json name the version and the git commit built (a commit of this checkout);
    every logged line has ms-swift's token_acc (= acc), an evaluation line eval_token_acc; the run ends with
    transformers' summary: train_runtime, train_loss (the mean of the step losses), samples and steps per second"""
    import ast, subprocess
    from conftest import BIN, ROOT
    v = subprocess.run([str(BIN), "--version"], capture_output=True, text=True)
    m = re.fullmatch(r"omnishard (\d+\.\d+\.\d+) \(git ([0-9a-f]{12})( \(modified\))?\)\n", v.stdout)
    assert v.returncode == 0 and m, v.stdout
    if subprocess.run(["git", "-C", str(ROOT), "rev-parse"], capture_output=True).returncode == 0:
        assert subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", m.group(2) + "^{commit}"]).returncode == 0
    out = tmp_path / "o"
    p = sft(tiny, out, "--max_steps", 5, "--per_device_train_batch_size", 2, "--split_dataset_ratio", 0.34,
            "--eval_steps", 5)
    a = json.load(open(out / "args.json"))["resolved"]
    assert a["omnishard_version"] == m.group(1) and a["git_commit"] == m.group(2) + (m.group(3) or "")
    train = [l for l in lines(out) if "loss" in l]
    assert len(train) == 5 and all(l["token_acc"] == l["acc"] for l in train)
    ev = [l for l in lines(out) if "eval_loss" in l]
    accs = [ev[0][k] for k in ev[0] if re.fullmatch(r"eval_(text|audio)_acc(_\d)?", k)]
    assert len(ev) == 1 and min(accs) <= ev[0]["eval_token_acc"] <= max(accs), ev
    s = re.findall(r"^omnishard sft: (\{'train_runtime'.*\})$", p.stderr, re.M)
    assert len(s) == 1, p.stderr
    s = ast.literal_eval(s[0])
    assert list(s) == ["train_runtime", "train_samples_per_second", "train_steps_per_second", "train_loss", "epoch"]
    assert s["train_loss"] == pytest.approx(sum(l["loss"] for l in train) / 5, rel=1e-3)
    assert 0 < s["train_runtime"] and s["train_samples_per_second"] * s["train_runtime"] == pytest.approx(5 * 2, rel=2e-2)
    assert s["train_steps_per_second"] * s["train_runtime"] == pytest.approx(5, rel=2e-2)
    assert s["epoch"] == pytest.approx(train[-1]["epoch"], abs=0.01)


@pytest.mark.parametrize("how", ["truncated", "rewritten"])
def test_a_dataset_file_changed_under_the_run_ends_every_rank_naming_it(tmp_path, how):
    """The SLAM-Omni records file cut to half (or rewritten with other records) while 2 ranks train from it: each
    record is read from the file when drawn (not through a mapping, whose pages past the new end gave every rank
    SIGBUS with no message; an edit in place changed samples silently), so the run ends on every rank in bounded
    time naming the file and what happened, and the last checkpoint is complete"""
    import subprocess, time
    from oracle import slam_samples_ref as sref
    from omni_run import BIN, MPIRUN
    sref.make_model_dir(str(tmp_path / "model"), T=512, A=80, G=3, hidden=16, layers=1, heads=2, kv_heads=1, inter=32)
    data = tmp_path / "d.jsonl"
    sref.write_jsonl(data, sref.make_records(16, A=80, seed=4))
    out = tmp_path / "o"
    cmd = [*MPIRUN, "-np", "2", str(BIN), "sft", "--model", str(tmp_path / "model"), "--dataset", str(data),
           "--output_dir", str(out), "--max_length", "512", "--max_steps", "100000", "--save_steps", "2",
           "--save_total_limit", "2", "--deepspeed", "zero3", "--ddp_timeout", "60"]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=dict(os.environ, OMP_NUM_THREADS="1"))
    try:
        deadline = time.monotonic() + 120
        while not (out / "checkpoint-4" / "manifest.json").exists() and p.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert p.poll() is None, p.communicate()[1]
        if how == "truncated":
            os.truncate(data, data.stat().st_size // 2)
        else:   # the same size, other text: a file edited in place
            with open(data, "r+b") as f:
                f.seek(data.stat().st_size // 2)
                f.write(b" ")
        t = time.monotonic()
        _, err = p.communicate(timeout=90)
        assert time.monotonic() - t < 60, err
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode not in (0, -7, 135), err   # not SIGBUS
    assert f"{data}: the dataset file was {how} while the run reads it" in err, err
    assert re.search(r"last complete checkpoint: \S+/checkpoint-(\d+)", err), err
    last = int(re.search(r"last complete checkpoint: \S+/checkpoint-(\d+)", err).group(1))
    assert (out / f"checkpoint-{last}" / "manifest.json").exists()
