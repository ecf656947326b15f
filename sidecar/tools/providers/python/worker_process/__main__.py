"""``python -I <this folder> <config>``: the worker process of one toolset (covalt_worker).

Run as a folder, not as a module of the ``sidecar`` package: the folder is the one entry Python puts
on ``sys.path`` under ``-I``, and it holds nothing but the ``covalt_worker`` package, so the worker
starts on the standard library, msgspec and the tool SDK alone, and the sandbox binds this folder
read-only and nothing else of the sidecar.
"""

import sys

from covalt_worker.main import main

if __name__ == "__main__":
    main(sys.argv)
