"""A LangGraph graph whose `deploy` node asks a person (bpm_client.langgraph.ask): built in
process by tests/live/clients/test_langgraph.py, and run as a process of its own for the
restart case:

    python -m tests.support.langgraph_deploy CHECKPOINTS.sqlite THREAD_ID

runs (or resumes) the thread with a SQLite checkpointer in that file and prints the final
state as JSON. BPM_URL and BPM_TOKEN say where to ask.
"""

import json
import sqlite3
import sys
from typing import Any, TypedDict

from bpm_client.langgraph import ask, invoke
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph

FORM = {
    "type": "object",
    "properties": {"replicas": {"type": "integer", "minimum": 1, "maximum": 10}},
    "required": ["replicas"],
}


class Deploy(TypedDict, total=False):
    service: str
    replicas: int
    outcome: str


def deploy(state: Deploy) -> dict[str, Any]:
    result = ask(f"Scale {state['service']}?", form=FORM, proposal={"replicas": state["replicas"]})
    if not result.approved:
        return {"outcome": f"stopped: {result.feedback}"}
    return {"replicas": result.values["replicas"], "outcome": "deployed"}


def graph(checkpointer: Any) -> Any:
    builder = StateGraph(Deploy)
    builder.add_node("deploy", deploy)
    builder.add_edge(START, "deploy")
    builder.add_edge("deploy", END)
    return builder.compile(checkpointer=checkpointer)


START_STATE: Deploy = {"service": "web", "replicas": 3}


def main(path: str, thread: str) -> None:
    connection = sqlite3.connect(path, check_same_thread=False)
    try:
        app = graph(SqliteSaver(connection))
        final = invoke(app, START_STATE, {"configurable": {"thread_id": thread}})
    finally:
        connection.close()
    print(json.dumps(final), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
