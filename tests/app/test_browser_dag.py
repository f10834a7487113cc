"""The DAG editor in a real browser (Playwright driving Debian's Chromium) against the whole
stack: start a blank workflow, add three nodes in the side panel, connect them by dragging
from a node's source handle to the next one's target handle on the React Flow canvas, save,
and check through the API that the saved version has the three nodes and their edges.
Screenshots: tests/artifacts/console/dag-*.png (git-ignored)."""

from __future__ import annotations

import re
import time
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from playwright.sync_api import expect

from tests.app import browser as b

pytestmark = pytest.mark.slow
SHOTS = Path(__file__).resolve().parents[1] / "artifacts" / "console"
NODES = (("retrieve", "embed"), ("lookup", "vector_search"), ("answer", "generate"))
CANVAS_TITLE = "streamlit_flow.streamlit_flow"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201
    reason = b.browser_missing()
    if reason:
        pytest.skip(reason)
    with b.running_stack(tmp_path_factory.mktemp("browser-dag"), live=False) as running:
        yield running


ALL_EDGES = re.compile(
    r"(?=.*to: retrieve\.text)(?=.*to: lookup\.embedding)"
    r"(?=.*to: answer\.prompt)(?=.*to: answer\.context)",
    re.DOTALL,
)


def _select(page, label: str, option: str) -> None:  # noqa: ANN001
    page.get_by_label(label).click()
    page.get_by_role("option", name=option, exact=True).click()


def _add(page, node_id: str, kind: str) -> None:  # noqa: ANN001
    """Add a node in the side panel until the canvas shows it: a click sent while the canvas
    remounts (it reruns the page when mounted) can be dropped by Streamlit, as an operator's
    would be, and is made again (at most three times)."""
    for _ in range(3):
        page.get_by_label("New node id").fill(node_id)
        _select(page, "Runs", kind)
        page.get_by_role("button", name="Add node").click()
        b.settle(page)
        if _wait_for_node(page, node_id, timeout_s=10):
            return
    raise AssertionError(f"the canvas never showed the added node {node_id!r}")


def _drag(page, frame, source: str, target: str) -> None:  # noqa: ANN001
    """Drag from ``source``'s right (source) handle to ``target``'s left (target) handle."""
    page.wait_for_timeout(1500)  # the canvas lays the graph out again after each change
    start = frame.locator(f'.react-flow__node[data-id="{source}"] .react-flow__handle.source')
    end = frame.locator(f'.react-flow__node[data-id="{target}"] .react-flow__handle.target')
    a, z = start.bounding_box(), end.bounding_box()
    page.mouse.move(a["x"] + a["width"] / 2, a["y"] + a["height"] / 2)
    page.mouse.down()
    for step in range(1, 11):  # React Flow follows pointer moves, not a jump
        page.mouse.move(a["x"] + (z["x"] - a["x"]) * step / 10,
                        a["y"] + (z["y"] - a["y"]) * step / 10)  # fmt: skip
    page.mouse.move(z["x"] + z["width"] / 2, z["y"] + z["height"] / 2)
    page.mouse.up()
    b.settle(page)


def _canvas(page, timeout_s: float = 30):  # noqa: ANN001, ANN202
    """The mounted canvas of the draft's newest revision. Each edit remounts the component in
    a new iframe and the one it replaces lingers a moment (unmounted with width -1), so the
    canvas is the last such frame that holds the workflow's input node."""
    deadline = time.monotonic() + timeout_s
    while True:
        for frame in reversed(page.frames):
            try:
                element = frame.frame_element()
                if (
                    element.get_attribute("title") == CANVAS_TITLE
                    and element.get_attribute("width") != "-1"
                    and frame.locator('.react-flow__node[data-id="input"]').count()
                ):
                    return frame
            except PlaywrightError:  # the main frame, or a frame detached meanwhile
                continue
        if time.monotonic() > deadline:
            raise AssertionError("no mounted DAG canvas on the page")
        page.wait_for_timeout(250)


def _wait_for_node(page, node_id: str, timeout_s: float) -> bool:  # noqa: ANN001
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if _canvas(page).locator(f'.react-flow__node[data-id="{node_id}"]').count():
            return True
        page.wait_for_timeout(250)
    return False


def _connect(page, source: str, target: str) -> None:  # noqa: ANN001
    """Drag ``source`` to ``target`` until the canvas shows that arrow: a drag sent while the
    canvas remounts (it reruns the page when mounted) can be lost, as an operator's would be,
    and is made again (at most three times)."""
    for attempt in range(3):
        _drag(page, _canvas(page), source, target)
        arrow = _canvas(page).locator(
            f'.react-flow__edge[aria-label="Edge from {source} to {target}"]'
        )
        try:
            arrow.first.wait_for(timeout=10_000)
            return
        except PlaywrightTimeout:
            page.screenshot(path=str(SHOTS / f"dag-drag-{source}-{target}-{attempt}.png"))
    raise AssertionError(f"the canvas never showed the arrow {source} -> {target}")


def _saved_versions(stack: b.Stack) -> list:
    headers = {"Authorization": f"Bearer {stack.token}"}
    answer = httpx.get(f"{stack.api_url}/admin/workflows", params={"name": "drawn"},
                       headers=headers, timeout=10)  # fmt: skip
    return answer.json()["items"]


def _save(page, stack: b.Stack) -> None:  # noqa: ANN001
    """Save the draft; click again only when the API holds no saved version (a click sent
    during the canvas's remount rerun can be dropped), never twice for one saved version."""
    for _ in range(3):
        page.get_by_role("button", name="Save as version 1").click()
        try:
            page.get_by_text("Saved drawn version 1").wait_for(timeout=20_000)
            return
        except PlaywrightTimeout:
            if _saved_versions(stack):
                return
    raise AssertionError("the draft was never saved as version 1")


def test_a_three_node_workflow_built_on_the_canvas_is_saved(stack: b.Stack) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    with b.chromium_page(height=1600) as page:
        b.sign_in(page, stack)
        b.open_page(page, "Workflows")
        b.settle(page)
        page.get_by_text("New workflow").click()
        page.get_by_label("Name").fill("drawn")
        page.get_by_role("button", name="Start draft").click()
        b.settle(page)
        for node_id, kind in NODES:
            _add(page, node_id, kind)
        _canvas(page).locator('.react-flow__node[data-id="answer"]').wait_for()
        page.screenshot(path=str(SHOTS / "dag-1-three_nodes.png"), full_page=True)
        chain = [("input", "retrieve"), ("retrieve", "lookup"), ("input", "answer"),
                 ("lookup", "answer")]  # fmt: skip
        for source, target in chain:
            _connect(page, source, target)
        # the canvas draws an arrow at once; the draft takes it when the component's answer
        # reaches the server: wait until the YAML view of the draft holds all four
        page.get_by_role("tab", name="YAML").click()
        expect(page.get_by_label("Spec (YAML)")).to_have_value(ALL_EDGES, timeout=60_000)
        page.get_by_role("tab", name="Node").click()
        _select(page, "Selected node (or click one on the canvas)", "retrieve")
        b.settle(page)
        _select(page, "Model (for a task)", "minilm-embed:1")
        page.get_by_role("button", name="Apply to node").click()
        b.settle(page)
        # a rerun briefly shows the old panel beside the new one: wait until one is left
        expect(page.get_by_label("Params (JSON or YAML)")).to_have_count(1, timeout=30_000)
        _select(page, "Selected node (or click one on the canvas)", "answer")
        b.settle(page)
        _select(page, "Model (for a task)", "smollm2-135m:1")
        page.get_by_role("button", name="Apply to node").click()
        b.settle(page)
        # the canvas mounts afresh after each edit and reports its state when mounted, which
        # reruns the page: a click sent before that rerun can be dropped by Streamlit
        _canvas(page).locator('.react-flow__node[data-id="answer"]').wait_for()
        b.settle(page)
        page.screenshot(path=str(SHOTS / "dag-2-connected.png"), full_page=True)
        _save(page, stack)
        b.settle(page)
        page.screenshot(path=str(SHOTS / "dag-3-saved.png"), full_page=True)

    headers = {"Authorization": f"Bearer {stack.token}"}
    with httpx.Client(base_url=stack.api_url, headers=headers) as http:
        (saved,) = http.get("/admin/workflows", params={"name": "drawn"}).json()["items"]
    spec = saved["spec"]
    assert [n["id"] for n in spec["nodes"]] == [n for n, _ in NODES]
    assert {(e["from"], e["to"]) for e in spec["edges"]} == {
        ("input.query", "retrieve.text"), ("retrieve.embedding", "lookup.embedding"),
        ("input.query", "answer.prompt"), ("lookup.documents", "answer.context"),
    }  # fmt: skip
