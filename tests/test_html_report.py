"""The HTML report: kernel cards, problems, SVG bars and sortable tables, in headless Chromium,
with hostile names from a run shown as text."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
from pathlib import Path

import pytest
from browser_helpers import CHROMIUM, Browser

from irscope.reports import html
from irscope.read.view import RunView
from irscope.reports.common import Details, Rendering
from irscope.reports.build import build_report
from irscope.store import Run

SAMPLE = Path(__file__).parent.parent / "samples" / "gpu" / "triton_kernels"
HOSTILE = "<script>alert(\"x\")</script> 'q' \x1b[31mred\x1b[0m"
BREAK_REASON = "<img src=x onerror=alert(1)> data-dependent branch"


@pytest.fixture(scope="module")
def run_path(tmp_path_factory) -> Path:
    """The committed H100 Triton run, plus a unit with a hostile name and two problems."""
    path = tmp_path_factory.mktemp("html") / "triton"
    shutil.copytree(SAMPLE, path)
    meta = json.loads((path / "run.json").read_text())
    meta.pop("read_only")
    (path / "run.json").write_text(json.dumps(meta))
    with Run.open(path) as run:
        ptx = run.read_text(run.stage(run.unit("add_kernel"), "ptx"))
        with run.transaction() as w:
            unit = w.add_unit(HOSTILE, "triton")
            w.add_stage(unit, "ptx", ptx, origin="test")
            w.add_event("graph_break", {"reason": BREAK_REASON, "file": "model.py", "line": 7},
                        unit)
            w.add_event("recompile", {"reason": "tensor 'x' size mismatch at index 0"}, unit)
    return path


@pytest.fixture(scope="module")
def page(run_path) -> str:
    with Run.open(run_path) as run:
        view = RunView(run)
        return html.render_report(build_report(view), Rendering(details=Details.of_view(view)))


def test_hostile_names_are_text_and_the_only_script_is_the_sorter(page):
    assert page.count("<script") == 1 and page.rstrip().endswith("</script>\n</body></html>")
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &#x27;q&#x27; ␛[31mred␛[0m" in page
    assert "\x1b" not in page and "<img" not in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page


def test_no_address_outside_the_file(page):
    assert not re.search(r"<[^>]*\s(?:src|href)\s*=", page, re.I)  # no such attribute
    assert "http:" not in page and "https:" not in page and "//" not in page.split("<script>")[1]


def test_kernel_cards_show_the_analysis_layers_figures(run_path, page):
    with Run.open(run_path) as run:
        details = Details.of_view(RunView(run))
    matmul = details.kernels[("triton", "matmul_kernel")][0]
    card = page.split("<h4>matmul_kernel</h4>")[1].split("</div>")[0]
    assert f"<dd>{matmul.registers}</dd>" in card
    assert f"<dd>{matmul.shared_bytes:,} B</dd>" in card
    assert f"<dd>{100 * matmul.occupancy:.0f}%</dd>" in card
    assert f">{matmul.occupancy_limiter}</dd>" in card


def test_problems_list_graph_breaks_recompiles_and_lint_findings(page):
    problems = page.split("<h2>Problems (")[1].split("</ul>")[0]
    items = problems.split("<li>")[1:]
    assert problems.startswith(f"{len(items)})</h2>")
    assert any("graph break" in i and "model.py:7" in i for i in items)
    assert any("recompile" in i and "size mismatch" in i for i in items)
    limited = [i for i in items if "lint occupancy_registers" in i]
    assert len(limited) == 1 and "<code>matmul_kernel</code>" in limited[0]
    assert not any("lint graph_break" in i for i in items)  # the event is listed once


def test_op_histograms_are_inline_svg(page):
    assert page.count("<svg class=\"bars\"") >= 20
    assert "<title>mov.u32: 18</title>" in page  # add_kernel's PTX, as the TUI counts it


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
def test_renders_in_chromium_without_errors_and_sorts(page, tmp_path):
    report = tmp_path / "report.html"
    report.write_text(page, encoding="utf-8")

    async def look():
        async with Browser(1100, 900) as browser:
            await browser.call("Page.addScriptToEvaluateOnNewDocument",
                               source="window.__alerts = []; window.alert = "
                                      "function (m) { window.__alerts.push(String(m)); };")
            await browser.goto(report.as_uri())
            await asyncio.sleep(0.5)
            seen = await browser.evaluate("""({
              text: document.body.innerText,
              alerts: window.__alerts,
              scripts: document.scripts.length,
              loads: performance.getEntriesByType("resource").length,
              svgs: document.querySelectorAll("svg.bars rect").length,
            })""")
            units = "document.querySelector('table.sortable tbody')"
            sort_by_regs = ("[...document.querySelectorAll('table.sortable')[0].tHead.rows[0]"
                            ".cells].find(c => c.textContent === 'Regs').click()")
            await browser.evaluate(sort_by_regs)
            ascending = await browser.evaluate(
                f"[...{units}.rows].map(r => r.cells[0].textContent)")
            await browser.evaluate(sort_by_regs)
            descending = await browser.evaluate(
                f"[...{units}.rows].map(r => r.cells[0].textContent)")
            return seen, ascending, descending, browser.errors, browser.exceptions

    seen, ascending, descending, errors, exceptions = asyncio.run(look())
    assert errors == [] and exceptions == []
    assert seen["alerts"] == [] and seen["scripts"] == 1 and seen["loads"] == 0
    assert "<script>alert(\"x\")</script> 'q' ␛[31mred␛[0m" in seen["text"]
    assert seen["svgs"] > 100
    # registers: add 26, hostile (no SASS) '-', softmax 29, layernorm 32, matmul 168
    assert ascending[:4] == ["add_kernel", "softmax_kernel", "layernorm_gelu_kernel",
                             "matmul_kernel"]
    assert descending[0] == "matmul_kernel"


ENVELOPE = "V1124 12:51:54.792000 21830 torch/_dynamo/convert_frame.py:961] "


def _trace(rank: int, path: Path, frames: range) -> None:
    """A TORCH_TRACE log of one rank that compiled one graph per frame."""
    lines = []
    for frame in frames:
        ids = {"frame_id": frame, "frame_compile_id": 0, "attempt": 0, "rank": rank}
        start = {"dynamo_start": {"stack": [{"line": 3, "name": f"f{frame}",
                                             "filename": "m.py"}]}, **ids}
        graph = {"dynamo_output_graph": {"sizes": {}}, "has_payload": "x", **ids}
        lines.append(f"{ENVELOPE}{json.dumps(start)}\n{ENVELOPE}{json.dumps(graph)}\n"
                     "\tclass GraphModule(torch.nn.Module):\n\t    def forward(self, x):\n")
    path.write_text("".join(lines), encoding="utf-8")


def test_ranks_that_compiled_differently_are_problems(tmp_path):
    from irscope.ingest import ingest

    logs = tmp_path / "logs"
    logs.mkdir()
    _trace(0, logs / "dedicated_log_torch_trace_rank_0_a.log", range(1))
    _trace(1, logs / "dedicated_log_torch_trace_rank_1_b.log", range(2))
    with Run.create(tmp_path / "run") as run:
        ingest(run, [logs])
        view = RunView(run)
        page = html.render_report(build_report(view), Rendering(details=Details.of_view(view)))
    problems = page.split("<h2>Problems (")[1].split("</ul>")[0]
    assert "rank divergence</span> in <code>[1/0] f1</code>: presence differs on rank 1" \
        in problems


def test_the_unit_table_fits_1400_pixels_with_every_figure(tmp_path, cli):
    """The profiled GPT-2's report in headless Chromium 1,400 pixels wide: the unit table,
    with all its figure columns, needs no sideways scrolling; the details are folded."""
    if CHROMIUM is None:
        pytest.skip("chromium is not installed")
    run = shutil.copytree(Path(__file__).parents[1] / "samples" / "gpu" / "torch_profile",
                          tmp_path / "gpt2")
    page = tmp_path / "report.html"
    assert cli("report", run, "-o", page).returncode == 0

    async def measure():
        async with Browser(1400, 900) as browser:
            await browser.goto(page.as_uri())
            for _ in range(200):
                if await browser.evaluate("document.readyState") == "complete":
                    break
                await asyncio.sleep(0.05)
            return await browser.evaluate("""(() => {
                const t = document.querySelector("table.units");
                const heads = [...t.querySelectorAll("th")].map(h => h.textContent);
                return {right: t.getBoundingClientRect().right, heads,
                        page: document.documentElement.scrollWidth,
                        open: document.querySelectorAll("details[open]").length,
                        folded: document.querySelectorAll("details").length};
            })()""")

    found = asyncio.run(measure())
    assert {"GPU µs", "Regs", "Spills", "Smem B", "Occupancy"} <= set(found["heads"])
    assert found["right"] <= 1400 and found["page"] <= 1400, found
    assert found["folded"] > 50 and found["open"] == 0
