"""Files the client reads itself fit the service's request body together.

Each file is cut at 1,000,000 characters, but the service takes 5 MiB in all
(BPM_MAX_BODY_BYTES): five such files were refused together (413) and the babysitter
bridge asked again and again. Now the longest are cut to a share of the budget, the short
ones are sent whole, and the service stores what was sent.
"""

import json
import warnings

import pytest
from bpm_client.babysitter import Effect, Run, breakpoint_request
from bpm_client.bodies import (
    FILES_BUDGET_BYTES,
    MAX_FILE_CHARS,
    ContextFileCut,
    breakpoint_body,
    within_budget,
)

LINE = 'step "deploy" ran\n'  # quotes and newlines take two bytes each in JSON


def big_files(folder, count: int) -> list[str]:
    names = []
    for index in range(count):
        name = f"log{index}.txt"
        (folder / name).write_text((f"{index}:" + LINE * 60_000)[:MAX_FILE_CHARS])
        names.append(name)
    (folder / "plan.md").write_text("# Plan\nship it\n")
    return [*names, "plan.md"]


def body_bytes(body) -> int:
    return len(json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode())


@pytest.mark.django_db
def test_five_long_files_and_a_short_one_are_taken_by_the_service(tmp_path, agent_client, settings):
    names = big_files(tmp_path, 5)
    with pytest.warns(ContextFileCut):
        body = breakpoint_body("Ship?", files=[tmp_path / name for name in names])
    files = body["payload"]["context"]["files"]
    assert body_bytes(body) < settings.BPM_MAX_BODY_BYTES
    for name, item in zip(names[:5], files[:5], strict=True):
        original = (tmp_path / name).read_text()
        kept = item["content"].split("\n[... cut by bpm:")[0]
        assert original.startswith(kept) and len(kept) > 300_000
        assert f"{len(original):,} characters in all" in item["content"]
    assert files[5]["content"] == "# Plan\nship it\n"
    response = agent_client.post("/api/breakpoints", body, format="json")
    assert response.status_code == 201, response.content[:300]
    stored = agent_client.get(f"/api/breakpoints/{response.json()['breakpointId']}").json()
    assert [f["content"] for f in stored["payload"]["context"]["files"]] == [
        f["content"] for f in files
    ]


def test_files_under_the_budget_are_sent_as_they_are():
    files = [{"path": "a.md", "content": "x" * 1000}, {"path": "b.md", "content": "y"}]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert within_budget(files, budget=2000) == files


def test_the_short_files_leave_what_they_do_not_use_to_the_long_ones():
    files = [
        {"path": "a", "content": "a" * 100},
        {"path": "b", "content": "b" * 5000},
        {"path": "c", "content": "c" * 5000},
    ]
    with pytest.warns(ContextFileCut):
        fitted = within_budget(files, budget=3000)
    sizes = [len(json.dumps(item["content"])) for item in fitted]
    assert fitted[0] == files[0]
    assert sum(sizes) <= 3000
    # a and its quotes took 102 bytes: b and c share the 2,898 left, at most 1,449 each
    assert 1300 < sizes[1] <= 1449 and 1300 < sizes[2] <= 1449


def test_the_babysitter_bridge_fits_the_files_of_a_run(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    names = big_files(project, 6)
    task = {
        "kind": "breakpoint",
        "effectId": "01EFFECT",
        "metadata": {"payload": {"context": {"files": [{"path": n} for n in names]}}},
    }
    effect = Effect.of(Run("01RUN", project / ".a5c" / "runs" / "01RUN"), task)
    with pytest.warns(ContextFileCut):
        request = breakpoint_request(effect, project)
    files = request["payload"]["context"]["files"]
    assert sum(len(json.dumps(f["content"])) for f in files) <= FILES_BUDGET_BYTES
    assert [f["path"] for f in files] == names
    assert files[-1]["content"] == "# Plan\nship it\n"
