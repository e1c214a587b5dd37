"""Settings: the DQA directory and the database connections, each with a test."""
import streamlit as st

from core import catalog
from core.backends.registry import BACKENDS, unavailable
from core.dqa import DQAError
from core.scenario import SCENARIOS
from pages.common import dqa_root

st.title("Settings")

st.subheader("DQA benchmark")
value = st.text_input("DQA directory", value=str(dqa_root() or ""),
                      help="The data/ folder of the public myeon9h/PlanRAG repository (or set DQA_DIR).")
if st.button("Use and test", key="dqa_test"):
    try:
        bench = catalog.dqa_benchmark(value)
    except DQAError as e:
        st.error(str(e))
    else:
        st.session_state["dqa_dir"] = value
        st.success(", ".join(f"{s}: {len(bench.questions(s))} questions" for s in SCENARIOS))

st.subheader("Databases")
for name, (language, _) in BACKENDS.items():
    reason = unavailable(name)
    if reason:
        st.warning(f"**{name}** ({language}) is not available: {reason}", icon=":material/block:")
    else:
        st.success(f"**{name}** ({language}) is available", icon=":material/check_circle:")
