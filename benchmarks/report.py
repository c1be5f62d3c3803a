"""BENCHMARKS.md and its bar chart, from the JSON ``compare.py`` writes."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
NAMES = {"raw": "raw bytes (no decode)", "train": "ImageNet train", "val": "ImageNet val",
         "simclr": "SimCLR, 2 views", "multicrop": "multi-crop 2x224 + 6x96",
         "recipe": "torchvision recipe 176 (TrivialAugmentWide, erasing, MixUp/CutMix)"}
SET_NAMES = {"original": "photos as they are", "reencoded": "FFCV's re-encoding", "1024": "1024 px"}
TARGETS = "slipstream"
BYTES = "slipstream (byte for byte)"  # the like-for-like row: the set's JPEGs unchanged
PLANES = "slipstream (yuv420)"  # each JPEG decoded to its YCbCr 4:2:0 planes


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _cell(entry: dict[str, Any]) -> str:
    if entry.get("unsupported"):
        return "unsupported"
    rates = entry.get("images_per_s") or []
    if not rates:
        return "failed"
    return f"{statistics.median(rates):,.0f} ({min(rates):,.0f}–{max(rates):,.0f})"


def _rate(by_system: dict[str, Any], system: str) -> float | None:
    return _median(by_system.get(system, {}).get("images_per_s", []))


def best_peer(by_system: dict[str, Any]) -> tuple[str, float] | None:
    """The fastest system of a row that is not slipstream, with its images/s."""
    rates = {s: r for s in by_system if not s.startswith(TARGETS) and (r := _rate(by_system, s)) is not None}
    if not rates:
        return None
    best = max(rates, key=rates.get)
    return best, rates[best]


def rows(results: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """(byte set, scenario, figures by system) for every row measured."""
    return [(byte_set, scenario, by_system) for byte_set, by_scenario in results["throughput"].items()
            for scenario, by_system in by_scenario.items()]


def row_title(results: dict[str, Any], byte_set: str, scenario: str) -> str:
    size = results["sets"][byte_set]["median_size"]
    return f"{NAMES.get(scenario, scenario)}, {SET_NAMES.get(byte_set, byte_set)} (median {size[0]}x{size[1]})"


def targets(results: dict[str, Any]) -> list[tuple[str, str, bool | None]]:
    """(target, measured, met) for each target of the comparison.  Ratios
    are slipstream's byte-for-byte row, like for like on the same bytes;
    its tiled row's ratio is given beside it."""
    out: list[tuple[str, str, bool | None]] = []
    tp = results["throughput"]

    def ratio_row(label: str, byte_set: str, scenario: str, peer: str | None, wanted: float) -> None:
        by_system = tp.get(byte_set, {}).get(scenario, {})
        theirs = best_peer(by_system) if peer is None else (peer, _rate(by_system, peer))
        ours, tiled = _rate(by_system, BYTES), _rate(by_system, TARGETS)
        if ours is None or theirs is None or theirs[1] is None:
            out.append((label, "not measured", None))
            return
        name, rate = theirs
        beside = f"; tiled {tiled / rate:.2f}x" if tiled else ""
        out.append((label, f"{ours / rate:.2f}x {name} ({ours:,.0f} against {rate:,.0f}){beside}", ours / rate >= wanted))

    def planes_row(byte_set: str, scenario: str, against: str, name: str, wanted: float) -> None:
        by_system = tp.get(byte_set, {}).get(scenario, {})
        planes, other = _rate(by_system, PLANES), _rate(by_system, against)
        label = f"yuv420, {row_title(results, byte_set, scenario)}: >= {wanted:g}x {name}"
        if planes is None or other is None:
            out.append((label, "not measured", None))
            return
        out.append((label, f"{planes / other:.2f}x ({planes:,.0f} against {other:,.0f})", planes / other >= wanted))

    ratio_row("ImageNet train, photos as they are: >= 1.5x the best peer", "original", "train", None, 1.5)
    ratio_row("ImageNet train, 1024 px: >= 2x the best peer", "1024", "train", None, 2.0)
    ratio_row("ImageNet train, FFCV's bytes: >= 1.5x FFCV", "reencoded", "train", "ffcv", 1.5)
    ratio_row("ImageNet train, FFCV's bytes: >= 5x the PyTorch DataLoader", "reencoded", "train", "dataloader", 5.0)
    ratio_row("ImageNet val, FFCV's bytes: >= 1.2x FFCV", "reencoded", "val", "ffcv", 1.2)
    ratio_row("raw bytes: >= 2x FFCV", "original", "raw", "ffcv", 2.0)
    ratio_row("torchvision's recipe, photos as they are: >= 3x the best peer", "original", "recipe", None, 3.0)
    for byte_set in ("original", "1024"):
        planes_row(byte_set, "train", BYTES, "byte for byte", 2.5)
        planes_row(byte_set, "train", TARGETS, "tiled", 1.6)
        planes_row(byte_set, "val", BYTES, "byte for byte", 2.0)
    planes_row("original", "multicrop", BYTES, "byte for byte", 1.8)
    cost = recipe_cost()
    if cost is not None:
        out.append(("the recipe's CPU per image <= 1.3x RandomResizedCrop 176 + flip + Normalize alone",
                    f"{cost[0]:.2f}x (`benchmarks/pipelines.py`, {cost[1]})", cost[0] <= 1.3))
    for byte_set, scenario, by_system in rows(results):
        cpu = {s: _median(e.get("cpu_s", [])) for s, e in by_system.items() if e.get("cpu_s")}
        if BYTES in cpu and len(cpu) > 1:
            best = min(cpu, key=cpu.get)
            out.append((f"lowest CPU ms per image, {row_title(results, byte_set, scenario)}",
                        f"{cpu[BYTES] * 1e3:.2f} ms byte for byte (lowest: {best}, {cpu[best] * 1e3:.2f} ms)",
                        best.startswith(TARGETS)))
    first = results.get("first_batch", {})
    ours = _median(first.get(TARGETS, {}).get("warm_s") or [])
    theirs = _median(first.get("ffcv", {}).get("warm_s") or [])
    floor = _median(first.get(TARGETS, {}).get("import_torch_s") or [])
    if ours is not None:
        beyond = f"; {ours - floor:.2f} s beyond `import torch` ({floor:.2f} s)" if floor is not None else ""
        out.append(("warm time to first batch <= 1 s", f"{ours:.2f} s{beyond}", ours <= 1.0))
    if ours is not None and theirs:
        out.append(("... and <= 1/5 of FFCV's", f"{ours / theirs:.2f} of FFCV's {theirs:.2f} s", ours <= theirs / 5))
    scaling = results.get("scaling", {}).get(TARGETS)
    if scaling:
        speedup = _median(scaling["ratios"])
        ceiling = results.get("scaling_ceiling", {}).get("ratio")
        out.append((f"scaling from 1 to {scaling['threads']} threads >= 1.8x",
                    f"{speedup:.2f}x" + (f" (machine ceiling {ceiling:.2f}x)" if ceiling else ""), speedup >= 1.8))
    return out


def row_source(results: dict[str, Any], byte_set: str, scenario: str) -> list[str]:
    """For figures of a row measured by later runs of part of the plan
    (``compare.py`` merges them in), a sentence naming each run and the
    systems it measured; else nothing."""
    row = f"{byte_set}/{scenario}"
    in_row = set(results["throughput"][byte_set][scenario])
    lines = []
    for run in results.get("merged", []):
        if row not in run["rows"]:
            continue
        theirs = in_row & set(run.get("systems") or in_row)
        who = "this row alone" if theirs == in_row else "this row's " + ", ".join(sorted(theirs))
        lines += [f"Measured by a later run of {who}, {run['timestamp']}, {run['repeats']} runs per system "
                  f"({run['epochs']} timed epochs each), slipstream {run['slipstream']}: `{run['command']}`", ""]
    return lines


def throughput_table(results: dict[str, Any], byte_set: str, scenario: str, by_system: dict[str, Any]) -> list[str]:
    """One row's table: each system's images/s, its ratio to the row's best
    peer, and the per-core figures."""
    cores = results["threads"]
    megapixels = results["sets"][byte_set]["mean_megapixels"]
    best = best_peer(by_system)
    lines = [f"### {row_title(results, byte_set, scenario)}", "", *row_source(results, byte_set, scenario),
             "| system | images/s | vs best peer | images/s per core | MP/s per core | CPU ms/image | peak RSS MB |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for system in sorted(by_system, key=lambda s: (not s.startswith(TARGETS), -(_rate(by_system, s) or 0))):
        entry = by_system[system]
        rate, cpu = _rate(by_system, system), _median(entry.get("cpu_s", []))
        if rate is None or cpu is None:
            lines.append(f"| {system} | {_cell(entry)} | – | – | – | – | – |")
            continue
        ratio = f"{rate / best[1]:.2f}x" if best else "–"
        mp = "–" if scenario == "raw" else f"{rate * megapixels / cores:,.0f}"
        lines.append(f"| {system} | {_cell(entry)} | {ratio} | {rate / cores:,.0f} | {mp} | {cpu * 1e3:.2f} | "
                     f"{max(entry.get('rss_mb') or [0]):,.0f} |")
    unsupported = [(system, e["unsupported"]) for system, e in by_system.items() if e.get("unsupported")]
    lines += [""] + [f"*{system}, unsupported:* {why}" for system, why in unsupported] + ([""] if unsupported else [])
    return lines


def bytes_section(results: dict[str, Any]) -> list[str]:
    """Which bytes each system decoded, set by set (``bytesets.py``)."""
    lines = ["## The bytes each system decodes", "",
             "Every row is run on one set of JPEG bytes, and every system of the row decodes exactly those bytes:",
             "`compare.py` checks each copy against the set's folder before timing anything (the JPEG bytes of",
             "slipstream's and FFCV's files by digest; slipstream's tiled file by decoding every image to the",
             "same pixels as the byte-for-byte file) and then runs each runner with a check mode once per row",
             "(section Checks). A run whose copies differ stops.", ""]
    for byte_set, info in results["sets"].items():
        lines += [f"### {SET_NAMES.get(byte_set, byte_set)}", "",
                  f"{info['description']}: `{info['folder']}`, {info['images']} images, median "
                  f"{info['median_size'][0]}x{info['median_size'][1]}, {info['mean_megapixels']:.3f} MP and "
                  f"{info['mean_bytes'] / 1e3:.0f} kB on average.", "",
                  "| system | scenarios | reads | which holds | MB on disk | x the JPEG bytes |",
                  "|---|---|---|---|---:|---:|"]
        seen: dict[tuple[str, str], list[str]] = {}
        read: dict[tuple[str, str], dict[str, Any]] = {}
        for scenario, reads in info["reads"].items():
            for system, what in reads.items():
                # By file name: a row merged in from a run in another checkout read the same copy elsewhere.
                key = (system, Path(what["file"]).name)
                seen.setdefault(key, []).append(NAMES.get(scenario, scenario))
                if "bytes" in what or key not in read:
                    read[key] = what
        jpeg_bytes = info["mean_bytes"] * info["images"]
        for (system, name), scenarios in seen.items():
            size = read[(system, name)].get("bytes")
            disk = f"{size / 1e6:,.1f} | {size / jpeg_bytes:.2f}x" if size else "– | –"
            lines.append(f"| {system} | {', '.join(scenarios)} | `{name}` | {read[(system, name)]['holds']} | {disk} |")
        lines.append("")
    return lines


def _sections(page: str) -> list[tuple[str, list[str], list[tuple[str, list[str]]]]]:
    """``page`` as (``## `` heading, its lines before any ``### ``, its
    ``### `` subsections as (heading, lines)); the text before the first
    ``## `` heading has the heading ``""``."""
    out: list[tuple[str, list[str], list[tuple[str, list[str]]]]] = [("", [], [])]
    fenced = False
    for line in page.split("\n"):
        fenced ^= line.startswith("```")
        if not fenced and line.startswith("## "):
            out.append((line, [], []))
        elif not fenced and line.startswith("### "):
            out[-1][2].append((line, []))
        elif out[-1][2]:
            out[-1][2][-1][1].append(line)
        else:
            out[-1][1].append(line)
    return out


def keep_other_sections(old: str, new: str) -> str:
    """``new`` with the sections of ``old`` that ``new`` does not have (the
    sections other benchmarks add to BENCHMARKS.md): a missing ``### ``
    subsection at the end of its ``## `` section, a missing ``## `` section
    after the section that came before it in ``old``."""
    ours = _sections(new)
    headings = {heading for heading, _, _ in ours} | {sub for _, _, subs in ours for sub, _ in subs}
    previous = ""
    for heading, intro, subs in _sections(old):
        if heading not in headings:
            at = next(i for i, (h, _, _) in enumerate(ours) if h == previous) + 1
            ours.insert(at, (heading, intro, subs))
            headings.add(heading)
        else:
            mine = next(section for section in ours if section[0] == heading)
            mine[2].extend(sub for sub in subs if sub[0] not in headings)
        previous = heading
    lines: list[str] = []
    for heading, intro, subs in ours:
        lines += ([heading] if heading else []) + intro
        for sub, body in subs:
            lines += [sub] + body
    return "\n".join(lines)


def write_report(report: dict[str, Any], json_path: Path) -> None:
    results = report["results"]
    chart = json_path.resolve().with_suffix(".png")
    _chart(results, chart)
    lines = ["# Benchmarks", "",
             "slipstream against FFCV, the PyTorch DataLoader with Pillow (stock, and with Pillow's `draft()`",
             "reduced-size decoding), DALI on CPU, SPDL, LitData and MosaicML streaming: same machine, same run,",
             "same JPEG bytes in every row, same pipeline semantics. Generated by `make bench`",
             "(`benchmarks/compare.py`); do not edit by hand.", "",
             "\"slipstream (byte for byte)\" reads its file holding each JPEG unchanged: the like-for-like row,",
             "which the targets use. \"slipstream\" reads the same JPEGs re-coded losslessly into 32-pixel",
             "restart-marker tiles (`RGBImageField(tile_width=32)`), so that crops entropy-decode only the tiles",
             "they touch; the decoded pixels are identical. \"slipstream (yuv420)\" reads each JPEG decoded once",
             "to its YCbCr 4:2:0 planes (`RGBImageField(write_mode=\"yuv420\")`): no entropy decoding at all,",
             "at several times the JPEG bytes on disk (section \"The bytes each system decodes\"); its pixels are",
             "within 2 of libjpeg-turbo's on 4:2:0 JPEGs. MP/s per core is megapixels of the stored images",
             "(each image's full size, whether a system decodes all of it or not) per second, over the cores",
             "used; libjpeg-turbo decodes roughly 150-350 MP/s per core.", "",
             f"![images/s per scenario]({chart.relative_to(REPO)})", "",
             "## Machine", "",
             f"- CPU: {report['machine']['cpu']}, {report['machine']['cores']} cores, "
             f"{report['machine']['memory_gib']} GiB",
             f"- {report['machine']['platform']}, Python {report['machine']['python']}",
             f"- slipstream {report['slipstream']} (libslipstream {report['libslipstream']}); peers: "
             + "; ".join(f"{name}: {version}" for name, version in sorted(results.get("versions", {}).items())
                         if not name.startswith(TARGETS)),
             f"- photos: `{report['folder']}`, batch {report['batch_size']}, {report['repeats']} runs per system "
             f"and row, {report['epochs']} timed epochs per run after a warm-up epoch, systems in rotating order",
             f"- {report['timestamp']}: `{report['command']}`", "",
             "2-core timings drift by 10-40% from run to run; the ratios are of medians taken in the same run.", ""]
    lines += bytes_section(results)
    lines += ["## Images per second", "",
              "Median over runs of each run's median epoch (range in parentheses); ratio to the row's fastest",
              "system other than slipstream; per-core figures over the cores used; CPU time per image (all",
              "processes of the system); peak resident memory.", ""]
    for byte_set, scenario, by_system in rows(results):
        lines += throughput_table(results, byte_set, scenario, by_system)
    reference = SET_NAMES.get(results["reference_set"], results["reference_set"])
    if results.get("first_batch"):
        lines += ["## Time to first batch", "",
                  f"Seconds from starting a fresh interpreter to holding the first ImageNet-train batch ({reference}):",
                  "with an empty compile cache, then again (median of 3) with the cache the first run left. Every",
                  "system but DALI hands over torch tensors, so each pays for `import torch`; its own column is the",
                  "median of 3 fresh interpreters of that system's environment that only import torch.", "",
                  "| system | cold | warm | `import torch` alone | warm beyond `import torch` |",
                  "|---|---:|---:|---:|---:|"]
        for system, fb in results["first_batch"].items():
            warm = _median([t for t in fb["warm_s"] if t is not None])
            floor = _median([t for t in fb.get("import_torch_s") or [] if t is not None])
            cells = [f"{fb['cold_s']:.2f} s" if fb["cold_s"] is not None else "failed",
                     f"{warm:.2f} s" if warm is not None else "failed",
                     f"{floor:.2f} s" if floor is not None else "–",
                     f"{warm - floor:.2f} s" if warm is not None and floor is not None else "–"]
            lines.append(f"| {system} | " + " | ".join(cells) + " |")
        lines.append("")
    if results.get("scaling"):
        lines += ["## Scaling", "",
                  f"ImageNet train ({reference}), images/s with one thread (or worker) and with all, each pair run",
                  "back to back so that machine drift cancels in its ratio; median over pairs (range in parentheses).",
                  "", "| system | 1 | all | speed-up |", "|---|---:|---:|---:|"]
        for system, sc in results["scaling"].items():
            ratios = sc["ratios"]
            lines.append(f"| {system} | {_median(sc['one']):,.0f} | {_median(sc['all']):,.0f} ({sc['threads']}) | "
                         f"{_median(ratios):.2f}x ({min(ratios):.2f}–{max(ratios):.2f}) |")
        ceiling = results.get("scaling_ceiling")
        if ceiling:
            lines += ["", f"The machine's own ceiling (`benchmarks/ceiling.py`): {ceiling['cores']} independent "
                      f"processes decoding JPEGs with no coordination at all reach {ceiling['ratio']:.2f}x the "
                      "images/s of one; no loader can scale beyond it here."]
        lines.append("")
    lines += integrity_section()
    lines += convert_section()
    lines += detection_section()
    lines += gpu_section()
    lines += ["## Targets", "", "| target | measured | met |", "|---|---|---|"]
    for label, measured, met in targets(results):
        lines.append(f"| {label} | {measured} | {'yes' if met else ('no' if met is False else '–')} |")
    lines.append("")
    if results.get("errors"):
        lines += ["## Failed runs", ""] + [f"- {e['system']}, {e['row']}: {e['error'].strip().splitlines()[-1][:200]}"
                                          for e in results["errors"]] + [""]
    if results.get("skipped"):
        lines += ["## Not measured", ""] + [f"- {name}: {why}" for name, why in results["skipped"].items()] + [""]
    lines += check_section(results)
    lines += ["## Settings", "",
              "Each system runs with its own documented best settings; what each runner used:", ""]
    for system, by_row in sorted(results.get("settings", {}).items()):
        lines.append(f"- {system}: {settings_text(by_row)}")
    if results.get("notes"):
        lines += ["", "Where a peer departs from its own fast path, or cannot run a row, and why:", ""]
        lines += [f"- {system}: {note}" for system, note in sorted(results["notes"].items())]
    lines += ["", "## Reproduce", "", "```bash",
              "make bench-peers   # the peers' environments: FFCV, DataLoader, DALI, SPDL, LitData, MosaicML streaming",
              "make bench         # everything, then this page", "```", ""]
    page = REPO / "BENCHMARKS.md"
    written = "\n".join(lines)
    page.write_text(keep_other_sections(page.read_text(), written) if page.exists() else written)
    _update_readme(results, report)
    print(f"wrote {REPO / 'BENCHMARKS.md'} and {chart}; updated README.md's headline table")


def settings_text(by_row: dict[str, dict[str, Any]]) -> str:
    """A system's settings over the rows it ran (``set/scenario`` -> settings):
    each setting once, and where it changes from row to row, each value with
    the rows it held in."""
    if not all(isinstance(settings, dict) for settings in by_row.values()):  # results of 2026-11-25 and before:
        return ", ".join(f"{key}={value}" for key, value in by_row.items())  # the settings of the last row
    keys = list(dict.fromkeys(key for settings in by_row.values() for key in settings))
    parts = []
    for key in keys:
        values: dict[str, tuple[Any, list[str]]] = {}
        for where, settings in by_row.items():
            values.setdefault(repr(settings.get(key)), (settings.get(key), []))[1].append(where)
        if len(values) == 1:
            parts.append(f"{key}={next(iter(values.values()))[0]}")
        else:
            parts.append(f"{key}: " + "; ".join(f"{value} ({', '.join(wheres)})" for value, wheres in values.values()))
    return ", ".join(parts)


def check_section(results: dict[str, Any]) -> list[str]:
    """The check-mode runs (RUNNERS.md, "Check"): per set, system and
    scenario, the images each epoch counted against the set's, and whether
    they were decoded from exactly the set's bytes."""
    checks = results.get("check")
    if not checks:
        return []
    lines = ["## Checks", "",
             "Each row once in check mode, for the runners that have it: images counted per epoch against the",
             "set's, and whether the bytes decoded were exactly the set's files, each once (digest of per-image",
             "BLAKE2b tags).", "", "| set | system | scenario | images per epoch (of) | same bytes | verdict |",
             "|---|---|---|---|---|---|"]
    for byte_set, by_system in checks.items():
        expected = by_system["expected"]["images"]
        for system, by_scenario in by_system.items():
            if system == "expected":
                continue
            for scenario, verdict in by_scenario.items():
                counted = ", ".join(str(n) for n in verdict.get("epoch_images", [])) or verdict.get("error", "")[-80:]
                same = ", ".join("yes" if m else "no" for m in verdict.get("bytes_digest_matches", [])) or "–"
                lines.append(f"| {SET_NAMES.get(byte_set, byte_set)} | {system} | {NAMES.get(scenario, scenario)} | "
                             f"{counted} ({expected}) | {same} | {'ok' if verdict['ok'] else 'FAILED'} |")
    return lines + [""]


def _newest(pattern: str) -> dict[str, Any] | None:
    """The newest ``benchmarks/results`` JSON whose name matches ``pattern`` (dated names sort by date), or None."""
    found = sorted((REPO / "benchmarks" / "results").glob(pattern))
    return json.loads(found[-1].read_text()) if found else None


def integrity_section() -> list[str]:
    """What page checks cost, from the newest ``benchmarks/integrity.py`` results (none: no section)."""
    data = _newest("integrity-*.json")
    if data is None:
        return []
    results, ratios, info = data["results"], data["ratios"], data["dataset"]

    def cell(values: list[float]) -> str:
        return f"{statistics.median(values):,.0f} ({min(values):,.0f}–{max(values):,.0f})"

    lines = ["## Page checks", "",
             "What checking page checksums costs (`benchmarks/integrity.py`, "
             f"{data['timestamp'][:10]}): {info['images']:,} ImageNet-sample JPEGs in {info['pages']} pages of "
             f"{info['page_size'] >> 20} MiB, ImageNet train, batch {data['batch_size']}; the file with page",
             "checksums against the same file without, a fresh process per file in each of "
             f"{data['rounds']} rounds, alternating. A loader checks a page the first time its process reads it.", "",
             "| file | epoch 1 images/s | epoch 2 images/s |", "|---|---:|---:|"]
    for variant, runs in results.items():
        lines.append(f"| {variant} | " + " | ".join(cell([r["epochs"][e] for r in runs]) for e in range(2)) + " |")
    paired = [f"{ratios[f'epoch_{e}']['median']:.3f} ({ratios[f'epoch_{e}']['min']:.3f}–"
              f"{ratios[f'epoch_{e}']['max']:.3f})" for e in (1, 2)]
    check_ms = statistics.median(data["check_all_pages_seconds"]) * 1000
    lines += [f"| ratio, paired by round | {paired[0]} | {paired[1]} |", "",
              f"The paired ratios spread more than the checks cost. Checking every page alone takes "
              f"{check_ms:.0f} ms of one core,",
              f"{data['check_share_of_first_epoch_cpu']:.2%} of the first epoch's CPU time; later epochs check "
              "nothing.", ""]
    return lines


def convert_section() -> list[str]:
    """Converting tar shards with ``ss.write`` and on Ray, from the newest
    ``benchmarks/convert.py`` results (none: no section), with its target."""
    data = _newest("convert-*.json")
    if data is None:
        return []
    rates, ratios, server, other = (data[k] for k in ("images_per_s", "over_write", "server_cpu_s", "other_cpu_s"))

    def cell(values: list[float], digits: int = 0) -> str:
        return f"{statistics.median(values):,.{digits}f} ({min(values):,.{digits}f}–{max(values):,.{digits}f})"

    lines = ["## Converting on Ray", "",
             f"`benchmarks/convert.py` ({data['date'][:10]}): {data['images']:,} ImageNet-sample JPEGs as "
             f"{data['tar_shards']} WebDataset tar shards of {data['per_tar_shard']:,} samples "
             f"({data['tar_bytes'] / 1e9:.2f} GB) in an S3 server (SeaweedFS) on this machine,",
             f"converted into {data['shard_size']} shards in the same server by `ss.write`, by the Ray writer "
             "(`slipstream.ray.write`) and by the datasink (`write_datasink(SlipstreamDatasink(...))`) on a local "
             f"Ray with 2 CPUs, already started; {data['rounds']} rounds, alternating. CPU: the server's "
             "seconds per conversion, and the rest of the machine's (writers, Ray, driver) per image.", "",
             "| system | images/s | per worker | over ss.write, same workers | S3 server CPU s | other CPU ms/image |",
             "|---|---:|---:|---:|---:|---:|"]
    for name, values in rates.items():
        workers = 2 if name.endswith(("2 processes", "2 workers")) else 1
        ratio = cell(ratios[name], 2) if name in ratios else ""
        per_image = [s * 1000 / data["images"] for s in other[name]]
        lines.append(f"| {name} | {cell(values)} | {statistics.median(values) / workers:,.0f} | {ratio} | "
                     f"{cell(server[name], 1)} | {cell(per_image, 2)} |")
    lines += ["", "| target | measured | met |", "|---|---|---|"]
    for name in data["target_met"]:
        ratio = statistics.median(ratios[name])
        lines.append(f"| the Ray writer within 15% of `ss.write`, {name.split(', ')[1]} | "
                     f"{ratio:.2f}x | {'yes' if ratio >= 0.85 else 'no'} |")
    lines += ["", "The Ray writer keeps the encoded samples in Ray's object store and lays each shard out as soon as "
              "its samples are encoded (docs/ray.md), so the store sees what it sees with `ss.write`: the source "
              "read once and the shards written once. The datasink keeps them in the store as parts, which cross "
              "it twice more: its server CPU column. Here the server shares the 2 cores with the writers; on a "
              "cluster it is elsewhere. 2-core timings drift by 10-40% between runs.", ""]
    return lines


def detection_section() -> list[str]:
    """Detection training throughput against DALI on CPU and the DataLoader,
    from the newest ``benchmarks/detection.py`` results (none: no section),
    with its targets."""
    data = _newest("detection-*.json")
    if data is None:
        return []
    throughput, checks = data["results"]["throughput"], data["check"]

    def cell(values: list[float], digits: int = 0) -> str:
        return f"{statistics.median(values):,.{digits}f} ({min(values):,.{digits}f}–{max(values):,.{digits}f})"

    lines = ["## Detection", "",
             f"`benchmarks/detection.py` ({data['timestamp'][:10]}): {data['data']['image_count']:,} ImageNet-sample "
             f"JPEGs with {data['data']['boxes']:,} generated boxes (at most {data['data']['max_boxes']} per image), "
             f"{data['pipeline']}; batches of {data['batch_size']}, {data['threads']} threads or workers, "
             f"{data['repeats']} interleaved rounds of {data['epochs']} timed epochs. `slipstream` reads its file "
             "re-coded losslessly into 32-pixel tiles, `slipstream-bytes` the JPEGs byte for byte; DALI and the "
             "DataLoader read the COCO folder.", "",
             "| system | samples/s | CPU ms/sample | boxes kept per image |", "|---|---:|---:|---:|"]
    for name, entry in throughput.items():
        if entry["samples_per_s"]:
            lines.append(f"| {name} | {cell(entry['samples_per_s'])} | {cell(entry['cpu_ms_per_sample'], 2)} | "
                         f"{checks[name]['mean_boxes_kept']:.2f} |")
    lines += ["", "| target | measured | met |", "|---|---|---|"]
    for pair, ratio in data["results"]["ratios"].items():
        if ratio.get("target") and not pair.startswith("slipstream-bytes"):
            lines.append(f"| {pair.replace(' / ', ' >= ')} x {ratio['target']:g} | {ratio['of_medians']:.2f}x "
                         f"(per round {cell(ratio['per_round'], 2)}) | "
                         f"{'yes' if ratio['of_medians'] >= ratio['target'] else 'no'} |")
    lines += ["", "Every system's JPEG decode dominates: slipstream's CPU time per sample is the decode of the crop "
              "window at full scale (an SSD crop keeps 30-100% of each side of a 500x375 photo, so no DCT scale "
              "below 1 covers a 300-pixel output) plus the resize and the normalization. The semantic differences "
              "that remain between the systems are in the JSON (`semantic_differences`). 2-core timings drift by "
              "10-40% between runs.", ""]
    return lines


def gpu_section() -> list[str]:
    """What a GPU machine measured, from the newest ``make gpu-check`` report
    (``gpu-check-*.json``: the training step and the decode place with all
    cores), scaling (``gpu-scaling-*.json``, ``benchmarks/scaling.py``) and decode place with few cores
    (``gpu-decode-*.json``); none: no section."""
    check = _newest("gpu-check-*.json")
    if check is None:
        return []
    machine, training = check["machine"], check["training_step"]

    def cell(values: list[float]) -> str:
        return f"{statistics.median(values):,.0f} ({min(values):,.0f}–{max(values):,.0f})"

    lines = ["## On a GPU machine", "",
             f"`make gpu-check` ({check['started'][:10]}) on one {machine['gpu']} with {machine['cores']} CPU cores "
             f"({machine['cpu']}), torch {machine['torch']}, Numba {machine['numba']} ({machine['threading_layer']} "
             f"threads). Batches of {training['batch_size']} ImageNet-train samples (RandomResizedCrop 224, flip, "
             f"float16) of the sample photos, on the GPU; medians of {training['rounds']} interleaved rounds (range "
             "in parentheses).", "",
             "### What a training step receives", "",
             f"`benchmarks/training_step.py`: a torchvision ResNet-50 step (bf16 autocast, channels_last, SGD) fed by "
             f"slipstream (`device=\"cuda\"`, all cores) and by the DataLoader + Pillow "
             f"({training['settings']['dataloader']['num_workers']} workers, pinned memory) on the same JPEG bytes; "
             "`ceiling` is the same step on synthetic GPU tensors. The GPU waits for data for the share of its "
             "time given.", "",
             "| feeder / consumer | images/s | GPU waits |", "|---|---:|---:|"]
    for name, row in training["measurements"].items():
        wait = f"{100 * row['gpu_wait_fraction']:.0f}%" if "gpu_wait_fraction" in row else ""
        lines.append(f"| {name} | {cell(row['runs'])} | {wait} |")
    scaling = _newest("gpu-scaling-*.json")
    if scaling is not None:
        threads = scaling["threads"]
        lines += ["", "### Scaling", "",
                  f"`benchmarks/scaling.py` ({scaling['timestamp'][:10]}, the same machine): images/s with 1 to "
                  f"{max(threads)} loader threads, the speed-up over one thread and the cores kept busy; each thread "
                  "takes the batch's samples one at a time.", "",
                  "| pipeline | " + " | ".join(f"{n} threads" for n in threads) + " |",
                  "|---|" + "---:|" * len(threads)]
        for name, rows in scaling["pipelines"].items():
            lines.append(f"| {name} | " + " | ".join(
                f"{rows[str(n)]['images_per_s']:,.0f} ({rows[str(n)]['speedup']:.2f}x, {rows[str(n)]['busy_cores']:.1f} "
                f"busy)" for n in threads) + " |")
        train = next(rows for name, rows in scaling["pipelines"].items() if name.startswith("train")
                     and "0 per chunk" not in name)
        most = train[str(max(threads))]["speedup"]
        lines += ["", f"Target: ImageNet train from 1 to {max(threads)} threads >= 12x: {most:.2f}x, "
                      f"{'met' if most >= 12 else 'not met'}. The rest is cores that are busy but slower together "
                      "(shared caches and memory bandwidth) and the end of each batch."]
    lines += ["", "### Decoding on the GPU", "",
              "`benchmarks/gpu_decode.py`: the CPU pipeline (batches copied to the GPU) against `DecodeOnDevice` "
              "(nvJPEG through torchvision, crop, resize, flip and normalize on the GPU), on the sample photos and "
              "on the same photos enlarged to four times their pixels, feeding nothing or a ResNet-50 step; CPU "
              "milliseconds per image for the whole process.", "",
              "| data / pipeline / consumer | threads | CPU decode images/s | GPU decode images/s | GPU / CPU | "
              "CPU ms per image (CPU, GPU decode) |", "|---|---:|---:|---:|---:|---:|"]
    for report in (check.get("gpu_decode"), _newest("gpu-decode-*.json")):
        if not report:
            continue
        for key, row in report["table"].items():
            lines.append(f"| {key} | {report['settings']['threads']} | "
                         f"{cell([r['images_per_s'] for r in row['cpu']['runs']])} | "
                         f"{cell([r['images_per_s'] for r in row['cuda']['runs']])} | {row['gpu_over_cpu']:.2f} | "
                         f"{row['cpu']['cpu_ms_per_image']:.2f}, {row['cuda']['cpu_ms_per_image']:.2f} |")
    lines += ["", "Decoding on the GPU costs the CPU an eighth to a tenth as much per image, and wins whenever the CPU "
              "cores are what limits: few cores per GPU, large photos, or the loader's rate alone. Beside a model "
              "that already keeps the GPU busy it loses, since nvJPEG and the resizes take GPU time from the "
              "step; with enough cores the CPU pipeline feeds the step at the GPU's ceiling.", ""]
    return lines


README_START, README_END = "<!-- benchmarks:start -->", "<!-- benchmarks:end -->"


def headline(results: dict[str, Any], report: dict[str, Any]) -> list[str]:
    """The README's table: per row, slipstream (byte for byte and tiled)
    against the row's fastest peer."""
    lines = [f"{report['machine']['cores']} cores ({report['machine']['cpu']}), batch {report['batch_size']}, "
             f"images/s, median of {report['repeats']} runs, every system of a row decoding the same JPEG bytes; in "
             "parentheses the ratio to the row's fastest peer (details, per-core figures and CPU time in "
             "[BENCHMARKS.md](BENCHMARKS.md)):", "",
             "| scenario | bytes | slipstream, byte for byte | slipstream, tiled | fastest peer |",
             "|---|---|---:|---:|---|"]
    for byte_set, scenario, by_system in rows(results):
        best = best_peer(by_system)
        cells = []
        for system in (BYTES, TARGETS):
            rate = _rate(by_system, system)
            cells.append("–" if rate is None else f"{rate:,.0f}" + (f" ({rate / best[1]:.2f}x)" if best else ""))
        peer = f"{best[0]}: {best[1]:,.0f}" if best else "–"
        lines.append(f"| {NAMES.get(scenario, scenario)} | {SET_NAMES.get(byte_set, byte_set)} | "
                     + " | ".join(cells) + f" | {peer} |")
    cost = recipe_cost()
    if cost is not None and any(scenario == "recipe" for _, scenario, _ in rows(results)):
        lines += ["", f"The recipe (TrivialAugmentWide, RandomErasing, MixUp/CutMix) costs slipstream {cost[0]:.2f}x "
                  "the CPU time per image of RandomResizedCrop 176 + flip + Normalize alone "
                  f"(`benchmarks/pipelines.py`, {cost[1]})."]
    return lines


def recipe_cost() -> tuple[float, str] | None:
    """The recipe's CPU per image over the plain train pipeline's at 176,
    from the newest ``benchmarks/pipelines.py`` run that measured both, with its date."""
    pipelines = _newest("pipelines-*.json")
    cost = (pipelines or {}).get("ratios", {}).get("recipe_cpu_over_train_176")
    return None if cost is None else (cost, pipelines["timestamp"][:10])


def _update_readme(results: dict[str, Any], report: dict[str, Any]) -> None:
    readme = REPO / "README.md"
    text = readme.read_text()
    if README_START not in text or README_END not in text:
        return
    head, rest = text.split(README_START, 1)
    _, tail = rest.split(README_END, 1)
    readme.write_text(head + README_START + "\n" + "\n".join(headline(results, report)) + "\n" + README_END + tail)


def _chart(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    measured = rows(results)
    systems = sorted({name for _, _, by_system in measured for name in by_system},
                     key=lambda s: (not s.startswith(TARGETS), s))
    width = 0.8 / max(1, len(systems))
    fig, ax = plt.subplots(figsize=(12, 4.8))
    for k, system in enumerate(systems):
        values = [_rate(by_system, system) or 0 for _, _, by_system in measured]
        ax.bar([i + k * width for i in range(len(measured))], values, width, label=system)
    ax.set_xticks([i + width * (len(systems) - 1) / 2 for i in range(len(measured))])
    ax.set_xticklabels([f"{NAMES.get(sc, sc)}\n{SET_NAMES.get(bs, bs)}" for bs, sc, _ in measured], fontsize=8)
    ax.set_yscale("log")  # raw bytes run two orders of magnitude above decoding
    ax.set_ylabel("images/s (median, log scale)")
    ax.legend(fontsize=7, ncol=2)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
