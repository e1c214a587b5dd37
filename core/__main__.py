import os
import sys

from core.cli.main import main

try:
    code = main()
    sys.stdout.flush()
except BrokenPipeError:  # the reader went away (``python -m core ... | head``): stop quietly, as shell tools do
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    code = 141
sys.exit(code)
