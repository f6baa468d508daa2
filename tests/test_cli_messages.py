"""The messages of the command line that say what went wrong and what to do instead: a
missing stage, a line that is no line, a run folder that is a file, a folder to run, a file
of another kind, a port in use, nothing to ingest, a damaged run.json."""

from __future__ import annotations

import socket

import pytest

from conftest import SAMPLES, run_main
from irscope.store import Run

FX_GRAPH = SAMPLES / "fx" / "mlp_dead_gate.dynamo_graph.txt"
FX_SOURCE = "/work/main/samples/scripts/seed_torch.py"  # as the sample's comments name it


@pytest.fixture
def run(tmp_path):
    """A run of one graph whose FX nodes come from lines 40-41 of a 45-line seed.py, with
    a raw record of each of 30 events beside it."""
    source = tmp_path / "seed.py"
    source.write_text("".join(f"x{i} = {i}\n" for i in range(1, 46)))
    with Run.create(tmp_path / "run", {"name": "run"}) as made:
        with made.transaction() as w:
            unit = w.add_unit("[0/0] mlp_dead_gate", "torch")
            w.add_stage(unit, "fx_graph", FX_GRAPH.read_text().replace(FX_SOURCE, str(source)),
                        name="dynamo_output_graph")
            for index in range(1, 31):
                w.add_stage(unit, "raw", "{}", name=f"chromium_event#{index}")
    return tmp_path / "run"


def test_a_missing_stage_lists_the_kinds_and_numbered_names_as_ranges(run):
    done = run_main("show", run, "1", "ptx", cwd=run.parent)
    assert done.returncode == 1 and done.stderr == (
        "irscope: error: unit '[0/0] mlp_dead_gate' has no stage 'ptx' (its kinds: fx_graph, "
        "raw; names: dynamo_output_graph, chromium_event#1..#30)\n")


def test_a_run_prefix_matching_two_runs_lists_both_and_no_more(run):
    runs = run.parent / ".irscope" / "runs"
    for name in ("20261127-0915-a", "20261127-0916-b"):
        with Run.create(runs / name, {"name": name}):
            pass
    done = run_main("ls", "2026", cwd=run.parent)
    assert done.returncode == 1 and done.stderr == (
        "irscope: error: '2026' matches 2 runs (20261127-0915-a, 20261127-0916-b): be more "
        "precise\n")


@pytest.mark.parametrize("location, code, message", [
    ("seed.py:abc", 2, "error: seed.py:abc: 'abc' is not a line number"),
    ("seed.py:-3", 2, "error: seed.py:-3: line -3 is not positive"),
    ("nope.py:x", 2, "error: nope.py:x: 'x' is not a line number"),
    ("seed.py:46", 0, "warning: seed.py:46 is past the end of the file (45 lines)"),
    ("seed.py:44", 0, "warning: seed.py:44 is no FX node's innermost frame")])
def test_where_says_why_a_line_is_none(run, location, code, message):
    done = run_main("where", run, location, cwd=run.parent)
    assert done.returncode == code and f"irscope: {message}" in done.stderr, done.stderr
    assert "no file of that name" not in done.stderr
    found = run_main("where", run, "seed.py:41", cwd=run.parent)
    assert "matmul_1:12, relu:13, matmul_2:14" in found.stdout


def test_inspect_into_a_file_or_of_a_folder_says_what_it_is(tmp_path):
    (tmp_path / "kern.py").write_text("x = 1\n")
    (tmp_path / "empty").mkdir()
    into_file = run_main("inspect", "-o", "kern.py", "kern.py", cwd=tmp_path)
    assert into_file.returncode == 1 and into_file.stderr == (
        "irscope: error: kern.py: exists and is not a folder (a run is a folder: choose "
        "another -o)\n")
    folder = run_main("inspect", "empty", cwd=tmp_path)
    assert folder.returncode == 1 and "empty: is a folder with no __main__.py" in folder.stderr


def test_a_folder_with_a_main_runs_as_python_runs_it(cli, tmp_path):
    package = tmp_path / "pkgx"
    package.mkdir()
    (package / "helper.py").write_text("X = 42\n")
    (package / "__main__.py").write_text("import sys, helper\nprint('ran', helper.X, "
                                         "sys.argv[1:])\n")
    done = cli("inspect", "--only", "torch", "-o", tmp_path / "run", "pkgx", "a", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "ran 42 ['a']" in done.stdout


def test_sass_of_a_ptx_file_points_to_irscope_ptx(tmp_path):
    ptx = SAMPLES / "ptx" / "hand_loop.ptx"
    done = run_main("sass", ptx, cwd=tmp_path)
    assert done.returncode == 1 and done.stderr == (
        f"irscope: error: {ptx}: no SASS instructions found: it is PTX (`irscope ptx {ptx}` "
        "analyses it)\n")


def test_serve_on_a_port_in_use_says_so_and_nothing_else(run):
    pytest.importorskip("textual_serve")
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        done = run_main("serve", run, "--port", port, cwd=run.parent)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith(f"irscope: error: cannot listen on 127.0.0.1:{port}: ")
    assert done.stderr.count("\n") == 1


def test_nothing_to_ingest_is_an_error_line(tmp_path):
    (tmp_path / "empty").mkdir()
    done = run_main("ingest", "empty", "-o", "run", cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1] == "irscope: error: nothing could be ingested"


def test_a_damaged_run_json_is_a_warning_once(run):
    (run / "run.json").write_text('{"name": ')
    done = run_main("report", run, "-f", "json", cwd=run.parent)
    assert done.returncode == 0
    assert done.stderr.count("irscope: warning: ") == 1
    assert f"{run}: run.json: Expecting value" in done.stderr


@pytest.mark.parametrize("args", [("report", "latest", "--provenance"),
                                  ("where", "latest", "x.py:1", "--time")])
def test_an_option_a_command_lacks_is_named_with_that_commands_usage(tmp_path, args):
    """`irscope report --provenance`: the error and the usage shown are the report's, not the
    top level's (`usage: irscope [-h] [--version] COMMAND ...`)."""
    result = run_main(*args, cwd=tmp_path)
    assert result.returncode == 2
    usage, message = result.stderr.strip().splitlines()[0], result.stderr.strip().splitlines()[-1]
    assert usage.startswith(f"usage: irscope {args[0]} ")
    assert message == f"irscope {args[0]}: error: unrecognized arguments: {args[-1]}"


def test_ls_names_a_graphs_kernel_units_as_what_they_are_not_launches(tmp_path):
    """torch_profile's [1/0] forward is linked to 51 kernel units (autotuned configurations
    among them) and launches 88 kernels a call, as the report's Launched column says: ls
    says 51 kernel units, not 'launches 51'."""
    from conftest import GPU_SAMPLES

    text = run_main("ls", GPU_SAMPLES / "torch_profile", cwd=tmp_path).stdout
    graph = text[text.index("[1/0] forward"):].splitlines()[1]
    assert "51 kernel units" in graph and "launches" not in graph
