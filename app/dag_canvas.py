"""The workflow canvas: the draft drawn with streamlit-flow (React Flow), laid out left to
right, editable in place.

On the canvas an operator drags from a node's right handle to another's left handle (a new
dependency), right-clicks a node or arrow to delete it, and clicks a node to open it in the
side panel. Nodes with validation problems are drawn red with their count. The component
sends its whole graph back after each change; :func:`show` turns it into the draft through
:func:`app.dag_graph.apply_canvas` and ignores answers older than the graph it last drew;
each draft revision mounts a fresh component (keyed by it) so the view fits the new layout.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import streamlit as st
from streamlit_flow import StreamlitFlowEdge, StreamlitFlowNode, StreamlitFlowState, streamlit_flow
from streamlit_flow.layouts import LayeredLayout

from app import dag_graph, workflow_draft
from app.dag_graph import INPUT, GraphEdge, GraphNode

STATE, SEEN, SELECTED = "wf_flow_state", "wf_flow_seen", "wf_selected"
_OK_STYLE = {"background": "#eef4ff", "border": "1px solid #4a6fa5", "borderRadius": "6px"}
_BAD_STYLE = {"background": "#ffe5e5", "border": "2px solid #d62728", "borderRadius": "6px"}
_INPUT_STYLE = {"background": "#f2f2f2", "border": "1px dashed #777", "borderRadius": "6px"}


def _content(node: GraphNode) -> str:
    lines = [f"**{node.id}** · {node.kind}"] + ([node.model] if node.model else [])
    if node.problems:
        lines.append(f"⚠ {len(node.problems)} problem(s)")
    return "  \n".join(lines)


def _flow_node(node: GraphNode) -> StreamlitFlowNode:
    style = _INPUT_STYLE if node.id == INPUT else _BAD_STYLE if node.problems else _OK_STYLE
    return StreamlitFlowNode(
        node.id, (0, 0), {"content": _content(node)},
        node_type="input" if node.id == INPUT else "default",
        source_position="right", target_position="left", selectable=True, connectable=True,
        deletable=node.id != INPUT, style={**style, "width": "170px", "fontSize": "11px", "padding": "2px 6px"},
    )  # fmt: skip


def _flow_edge(edge: GraphEdge) -> StreamlitFlowEdge:
    return StreamlitFlowEdge(
        f"{edge.source}->{edge.target}", edge.source, edge.target, edge_type="smoothstep",
        marker_end={"type": "arrowclosed"}, deletable=True, label=edge.label,
        label_show_bg=True, label_style={"fontSize": "10px"},
    )  # fmt: skip


def flow_state(spec: Mapping, problems: Mapping[str, Sequence[str]]) -> StreamlitFlowState:
    """The component's state for ``spec`` (a fresh timestamp: the browser redraws it)."""
    nodes, edges = dag_graph.graph_of(spec, problems)
    return StreamlitFlowState([_flow_node(n) for n in nodes], [_flow_edge(e) for e in edges])


def show(draft: workflow_draft.Draft, problems: Mapping[str, Sequence[str]]) -> None:
    """Draw the draft; apply what the operator changed on the canvas (then rerun) and keep
    the clicked node as the selection (session key ``wf_selected``)."""
    built = st.session_state.get(STATE)
    if built is None or built[0] != (draft.name, draft.base, draft.rev):
        built = ((draft.name, draft.base, draft.rev), flow_state(draft.spec, problems))
        st.session_state[STATE] = built
    state = built[1]
    answer = streamlit_flow(
        f"wf_flow_{draft.rev}", state, height=440, fit_view=True, allow_new_edges=True,
        layout=LayeredLayout("right", node_node_spacing=60, node_layer_spacing=90),
        get_node_on_click=True, enable_node_menu=True, enable_edge_menu=True,
        hide_watermark=True,
    )  # fmt: skip
    if answer.timestamp <= state.timestamp or answer.timestamp == st.session_state.get(SEEN):
        return
    st.session_state[SEEN] = answer.timestamp
    if answer.selected_id and answer.selected_id != INPUT:
        st.session_state[SELECTED] = answer.selected_id
    edited = dag_graph.apply_canvas(
        draft.spec, [n.id for n in answer.nodes], [(e.source, e.target) for e in answer.edges]
    )
    if edited != draft.spec:
        workflow_draft.replace(edited)
        st.rerun()
