"""Who may do what: the signed-in identity and its role (``roles``), the server's configuration of sign-in, roles
and model endpoints (``config``), the named model endpoints whose keys never leave the server (``endpoints``) and
the check that refuses to serve a network without sign-in (``exposure``). Nothing here imports Streamlit: the pages
turn ``st.user`` into an ``Identity`` (ui/access.py); the command line acts as the admin ``local operator``."""
