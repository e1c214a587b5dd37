"""Settings for this session: the language model, the database connections, the DQA directory and the scenarios
folder, each with a test. The API key and passwords stay in the session; the environment gives the defaults.

With sign-in, an analyst chooses a model endpoint by name (its key stays on the server) and the run limits; what the
server reads (its model endpoints and keys, database connections, files and folders) is the admin's. Every "Use"
asks the gate (core.auth.gate) again when pressed."""

from ui.router import through_router

through_router()  # first: a fresh server may run this page without app.py (ui/router.py)

from dataclasses import replace
from pathlib import Path

import streamlit as st

from core.auth import endpoints
from core.model.bounds import NUMBERS
from core.auth.config import ConfigError
from core import scenarios
from core.scenarios.dqa.source import DQAError
from core.llm.client import REPLAY_PREFIX, LLMError
from core.llm.tokenizer_file import TokenizerFileError, counted_by
from core.scenarios.plugins.checks import check_folder
from core.actions import choices
from core.analysis.format import number, timestamp
from core.config import home as project_home
from core.config.settings import DatabaseSettings, database_url, jobs_mode
from core.jobs import local, queue
from core import telemetry
from core.store.database import SCHEMA_HEAD, shown
from ui import access
from ui.common import dqa_root, in_words, session_db, session_limits, session_llm
from ui.kept import kept
from ui.limit_inputs import limit_inputs
from ui.untrusted import md, md_code

PROVIDERS = {"openai": "OpenAI", "compatible": "OpenAI-compatible server", "replay": "Replay file"}
KEPT = "kept (leave empty to keep it)"
QUEUE_OPEN = "settings_queue"  # the job queue expander's open state
#: Where runs and benchmark items run, by jobs mode (PLANRAG_JOBS) outside the team's queue.
RUNS_RUN = {"process": "Runs run in a process of their own that this app starts (PLANRAG_JOBS=process, the default), "
                       "so that pages stay quick while agents work; benchmark items run in this app's process. "
                       "PLANRAG_JOBS=threads runs both in this app's process.",
            "threads": "Runs and benchmark items run in this app's process (PLANRAG_JOBS=threads)."}
ICONS = {"success": ":material/check_circle:", "warning": ":material/block:", "error": ":material/error:"}


#: Command-line words in core's model messages, as this page names the same inputs.
SETTINGS_WORDS = [(r"--llm MODEL or OPENAI_MODEL", "Model above"),
                  (r"--base-url or OPENAI_BASE_URL", "Base URL above"),
                  (r"set OPENAI_BASE_URL \(--base-url\)", "set the Base URL"),
                  (r"set OPENAI_API_KEY", "enter the API key"), (r"check OPENAI_API_KEY", "check the API key"),
                  (r"\(--context-tokens, or the Settings page\)", "(Limits of each run, below)")]


def show_results(section: str, results: list[tuple[str, str]] | None = None) -> None:
    """Show a section's last test results ((kind, message) pairs), remembering new ones for later reruns."""
    remembered = st.session_state.setdefault("settings_results", {})
    if results is not None:
        remembered[section] = results
    for kind, message in remembered.get(section, []):
        getattr(st, kind)(message, icon=ICONS[kind])


def scenario_check(folder) -> list[tuple[str, str]]:
    """What ``scenario check`` says of each scenario in ``folder``, and what kept the registry from loading one
    (e.g. a name already used), as (kind, message) results."""
    if not Path(folder).expanduser().is_dir():  # e.g. the default folder, before a first scenario: not an error
        return [("warning", f"`{folder}` does not exist yet: it is where your own scenarios go. The Scenarios page "
                            "shows the built-in ones; to add one, make this folder with a scenario in it "
                            "(docs/scenarios.md).")]
    results, said = [], set()
    for path, problems, facts in check_folder(folder):
        said.update(problems)
        if problems:
            results.append(("error", f"**{path.name}** cannot be used:\n" + "\n".join(f"- {p}" for p in problems)))
        else:
            results.append(("success", f"**{path.name}**: {facts[0]}. Candidates and simulator checked on every "
                                      "question."))
    results += [("error", problem) for problem in scenarios.problems() if problem not in said]
    if not results:
        results.append(("warning", f"No scenario in `{folder}` (`python -m core scenario new NAME` writes one)."))
    return results


def _masked_url(url: str) -> str:
    """A connection URL with its password hidden (shown to those who may not change it)."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    return url.replace(f":{parts.password}@", ":***@") if parts.password else url


def endpoint_choice(llm) -> None:
    """The server's named model endpoints, to choose one by name: model and URL shown, the key never."""
    try:
        found = endpoints.endpoints()
    except ConfigError as e:
        st.error(str(e), icon=ICONS["error"])
        return
    if not found:
        if access.signin_on():
            st.caption("No model endpoint is configured on this server (an admin defines them in "
                       "[planrag.endpoints] of the secrets file); runs can use the recorded replays.")
        return
    names = list(found)

    def label(n: str) -> str:
        where = f" at {found[n].base_url}" if found[n].base_url else " (OpenAI)"
        return f"{n}: {found[n].model}{where} · {found[n].key_state()}"

    name = st.selectbox("Model endpoint", names, index=names.index(llm.endpoint) if llm.endpoint in names else 0,
                        key="llm_endpoint", format_func=label, **access.disabled("settings"))
    if st.button("Use this endpoint", key="llm_endpoint_use", **access.disabled("settings")):
        with access.asking():
            st.session_state["llm"] = choices.use_endpoint(name, session_llm(), who=access.current())
            st.toast(f"This session's runs use the endpoint {name}.", icon=ICONS["success"])


st.title("Settings")
if access.signin_on():
    st.caption(f"These settings hold for this browser session. You are signed in as {access.role()}: "
               + {"viewer": "you can read them; changing them needs the analyst role (runs) or the admin role "
                            "(what the server reads).",
                  "analyst": "you choose a model endpoint and the limits of your runs; what the server reads "
                             "(endpoints, databases, folders) is the admin's.",
                  "admin": "you also set what the server reads."}[access.role()])
else:
    st.caption("These settings hold for this browser session; environment variables give their defaults.")


def own_model(llm) -> None:
    """A model of one's own: OpenAI, an OpenAI-compatible server or a replay file, with its key. A key entered here
    is sent only to the base URL entered with it; a key kept from before only to the server it was given for."""
    replaying = (llm.model or "").startswith(REPLAY_PREFIX)
    provider = st.segmented_control("Provider", list(PROVIDERS), format_func=PROVIDERS.get, required=True,
                                    default="replay" if replaying else "compatible" if llm.base_url else "openai",
                                    key="llm_provider")
    if provider == "replay":
        path = st.text_input("Replay file", llm.model.removeprefix(REPLAY_PREFIX) if replaying else "",
                             key="llm_replay", help="A JSON array of recorded replies, played back in order.")
        chosen = replace(llm, model=REPLAY_PREFIX + path if path else None, base_url=None, endpoint=None)
    else:
        model = st.text_input("Model", "" if replaying else llm.model or "", key="llm_model",
                              placeholder="e.g. gpt-4o")
        base_url = (st.text_input("Base URL", llm.base_url or "", key="llm_base_url",
                                  placeholder="e.g. http://localhost:8000/v1") if provider == "compatible" else None)
        key = st.text_input("API key", type="password", key="llm_key", placeholder=KEPT if llm.api_key else "")
        timeout, retries, cap = st.columns(3)
        timeout_s = timeout.number_input("Timeout per attempt (s)", *NUMBERS["timeout_s"], float(llm.timeout_s),
                                         step=10.0,
                                         key="llm_timeout", help="An attempt's time limit T: a streamed reply's "
                                         "first words may take 3 T, then it is cut only after T of silence, never "
                                         "while text flows; any reply ends at 10 T. A retry after a timeout waits "
                                         "longer, up to twice this.")
        max_retries = retries.number_input("Retries", *NUMBERS["max_retries"], int(llm.max_retries), key="llm_retries",
                                           help="Retries of a call that timed out, hit a server error or a rate "
                                                "limit.")
        max_tokens = cap.number_input("Reply cap (tokens)", 1, NUMBERS["max_reply_tokens"][1], int(llm.max_reply_tokens or 2048),
                                      key="llm_max_tokens", help="Sent as max_tokens to OpenAI-compatible servers, "
                                      "as max_completion_tokens to OpenAI; at most half the model's context window "
                                      "(the rest is for the prompt).")
        tokenizer = st.text_input("Tokenizer file (optional)", llm.tokenizer or "", key="llm_tokenizer",
                                  placeholder="e.g. /models/Qwen2.5-Coder-1.5B/tokenizer.json",
                                  help="The model's Hugging Face tokenizer.json on the app's server: it counts each "
                                       "request's tokens for the context window, offline. Without it, the server's "
                                       "tokenizer where it has one, else an estimate from characters. Default: "
                                       "PLANRAG_TOKENIZER.")
        # A key typed here is for the URL typed with it; a kept key stays bound to the server it was given for.
        chosen = replace(llm, model=model or None, base_url=base_url or None, api_key=key or llm.api_key,
                         key_url=(base_url or None) if key else llm.key_url, endpoint=None, timeout_s=timeout_s,
                         max_retries=max_retries, max_reply_tokens=max_tokens, tokenizer=tokenizer.strip() or None)
        st.caption("The key stays in this session's memory: it is never written to disk or to the run store, and "
                   "it is sent only to the server it was entered for (a kept key: the server it was given for). "
                   "For a key that persists, set `OPENAI_API_KEY` (with `OPENAI_BASE_URL`) before starting the app.")
    use, test = st.columns([1, 5])
    tested = None
    if use.button("Use for this session", key="llm_use"):
        with access.asking():
            try:
                st.session_state["llm"] = llm = choices.use_model(chosen, llm, who=access.current())
                st.toast(f"This session uses {chosen.model or 'no model'}.", icon=ICONS["success"])
                tested = []  # what was said of another choice (a tokenizer file refused) no longer holds
            except TokenizerFileError as e:
                tested = [("error", md(str(e)))]
    if test.button("Test", key="llm_test"):
        with access.asking(), st.spinner("Asking the model for one token..."):
            try:
                tested = [("success", md(choices.test_model(chosen, llm, who=access.current())))]
            except LLMError as e:
                tested = [("error", md(in_words(str(e), SETTINGS_WORDS)))]
    show_results("llm", tested)


def show_queue() -> None:
    """The job queue as ``python -m core worker --status`` shows it: each worker, the waiting and failed jobs. Read
    only while its expander is open (Streamlit's lazy expander): a closed one asks the team store nothing."""
    box = st.expander("Job queue: workers and jobs", icon=":material/dns:", key=kept(QUEUE_OPEN), on_change="rerun")
    if not box.open:
        return
    with box:
        try:
            state = queue.status()
        except Exception as e:  # noqa: BLE001 - said; the page goes on
            st.warning(f"The job queue cannot be read: {md(str(e).strip())}")
            return
        rows = [{"worker": w["name"], "host": w["host"], "pid": w["pid"], "queues": w["queues"],
                 "since": timestamp(w["since"]) if w["since"] else None,
                 "jobs running": w["running"], "last heartbeat (s ago)": round(w["heartbeat_s"], 1),
                 "up": w["heartbeat_s"] <= queue.LEASE_S} for w in state["workers"]]
        if rows:
            st.dataframe(rows, hide_index=True)
        else:
            st.caption("No worker is registered.")
        oldest = state["oldest_waiting_s"]
        st.caption(f"Waiting: {state['waiting']} job(s)" + (f", the oldest queued {number(oldest, decimals=0)} s ago."
                                                            if oldest else ".") + " Jobs per queue and status: "
                   + "; ".join(f"{name}: " + ", ".join(f"{n} {s}" for s, n in sorted(states.items()))
                               for name, states in sorted(state["counts"].items())))
        if state["failed"]:
            st.dataframe([{"job": j["id"], "task": j["task"], "run or item": j["subject"], "queue": j["queue"],
                           "at": j["at"]} for j in state["failed"]], hide_index=True)


st.subheader("Language model")
llm = session_llm()
endpoint_choice(llm)
if access.allowed("endpoints"):
    own_model(llm)
llm = session_llm()
key_note = "" if (llm.model or "").startswith(REPLAY_PREFIX) else ", API key set" if llm.api_key else ", no API key"
st.caption(f"In use: {md_code(llm.model or 'no model')}" + (f" at {md(llm.base_url)}" if llm.base_url else "")
           + (f" (endpoint **{md(llm.endpoint)}**)" if llm.endpoint else key_note)
           + (f"; tokens counted by {md(counted_by(llm.tokenizer))}" if llm.tokenizer else ""))

st.subheader("Limits of each run")
st.caption("At the call, token or cost limit the agent is asked for its final answer at once; an action repeated "
           "that many times ends the run as stuck. Costs are estimated from the benchmark's price table. Each "
           "database query is stopped at its timeout, keeps at most the row cap, and each value at most the cell "
           "size (longer ones are cut and marked).")
chosen_limits = limit_inputs(session_limits(), key="limits")
if st.button("Use for this session", key="limits_use", **access.disabled("settings")):
    with access.asking():
        try:
            st.session_state["limits"] = choices.use_limits(chosen_limits, who=access.current())
            st.toast("This session's runs use these limits.", icon=ICONS["success"])
        except ValueError as e:
            st.error(md(e), icon=ICONS["error"])

admin = access.disabled("databases")  # what the server connects to and reads: the admin's
st.subheader("Databases")
db = session_db()
st.caption("SQLite and Ladybug are embedded and need nothing; MySQL / MariaDB and Neo4j are servers, used as set "
           "below (defaults: MYSQL_URL, NEO4J_URI, NEO4J_USER, NEO4J_PASSWORD).")
mysql_url = st.text_input("MySQL / MariaDB URL", db.mysql_url if not admin else _masked_url(db.mysql_url),
                          key="db_mysql_url", help="mysql://USER[:PASSWORD]@HOST[:PORT]", **admin)
uri, user, password = st.columns(3)
neo4j_uri = uri.text_input("Neo4j URI", db.neo4j_uri or "", key="db_neo4j_uri", placeholder="bolt://localhost:7687",
                           **admin)
neo4j_user = user.text_input("Neo4j user", db.neo4j_user, key="db_neo4j_user", **admin)
neo4j_password = password.text_input("Neo4j password", type="password", key="db_neo4j_password",
                                     placeholder=KEPT if db.neo4j_password else "", **admin)
use, test = st.columns([1, 5])
typed_db = db if admin else DatabaseSettings(mysql_url=mysql_url, neo4j_uri=neo4j_uri or None, neo4j_user=neo4j_user,
                                             neo4j_password=neo4j_password or db.neo4j_password)
if use.button("Use for this session", key="db_use", **admin):
    with access.asking():
        st.session_state["db_settings"] = choices.use_databases(typed_db, who=access.current())
        st.toast("This session uses these connections.", icon=ICONS["success"])
tested = None
if test.button("Test connections", key="db_test", **access.disabled("test_connections")):
    with access.asking(), st.spinner("Connecting..."):
        tested = [("warning", f"**{a.backend}** ({a.language}) cannot be used: {md(a.problem)}") if a.problem
                  else ("success", f"**{a.backend}** ({a.language}) is available")
                  for a in choices.test_connections(typed_db, session_db(), who=access.current())]
show_results("db", tested)

st.subheader("Where runs are kept")
team_url = database_url()
if team_url:  # the app started, so its schema is current (app.py checks it)
    st.caption(f"The team store: PostgreSQL at {md_code(shown(team_url))} (PLANRAG_DATABASE_URL), schema revision "
               f"{SCHEMA_HEAD}. Runs, their events, reviews and checkpoints, grade overrides, benchmark results, "
               "the reply cache and learned plans are shared with everyone using it.")
    if queue.enabled():
        gap = queue.describe_worker_gap()
        st.caption(f"Runs and benchmark items are jobs of the team's queue, run by workers ({md_code('python -m core worker')} "
                   f"on any machine that reaches the store): "
                   + (md(gap) if gap else f"{queue.workers()} up now.") + " PLANRAG_JOBS=threads runs them in this "
                   "app's process instead.")
        if access.allowed("databases"):  # the queue's workers and jobs: the admin's (python -m core worker --status)
            show_queue()
    else:
        st.caption(RUNS_RUN[jobs_mode()])
else:
    st.caption(f"This machine's project home: SQLite files under {md_code(str(project_home.data_home()))} "
               "(PLANRAG_HOME). Set PLANRAG_DATABASE_URL=postgresql://... to share them as a team (README, "
               "Team deployment).")
    st.caption(RUNS_RUN[jobs_mode()])
st.caption(telemetry.describe())
if telemetry.endpoint() and jobs_mode() == "process" and (told := local.spans()) is not None:
    st.caption(f"The runs' spans are sent by the local run process: {told[0]} sent, {told[1]} dropped, as it last "
               "told (once a run's spans were out).")

paths = access.disabled("server_paths")
st.subheader("DQA benchmark")
folder = st.text_input("DQA directory", str(dqa_root() or ""), key="dqa_dir_input", **paths,
                       help="The data/ folder of the public myeon9h/PlanRAG repository (default: DQA_DIR).")
tested = None
if st.button("Use and test", key="dqa_test", **paths):
    with access.asking():
        try:
            tested = [("success", md(choices.use_dqa(folder, who=access.current())))]
            st.session_state["dqa_dir"] = folder
        except DQAError as e:
            tested = [("error", md(e))]
show_results("dqa", tested)

st.subheader("Scenarios folder")
folder = st.text_input("Your scenarios", str(scenarios.scenarios_dir()), key="scenarios_dir_input", **paths,
                       help="One folder per scenario, each with a scenario.toml (docs/scenarios.md); default: "
                            "PLANRAG_SCENARIOS, else scenarios/ in the project home.")
tested = None
if st.button("Use and check", key="scenarios_dir_use", **paths):
    with access.asking():
        chosen_folder = folder.strip() or None
        in_use = choices.use_scenarios_folder(chosen_folder, who=access.current())
        st.session_state["scenarios_dir"] = chosen_folder
        with st.spinner("Checking every scenario: data, questions, candidates, simulator..."):
            tested = [(kind, message) for kind, message in scenario_check(in_use)]
show_results("scenarios", tested)
