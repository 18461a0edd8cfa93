"""The book's build tooling, apart from what a chapter computes and shows: its commands (``commands``: plan and
prepare its runs, sweep a chapter with papermill, derive the shipped tables), the plan of every run it needs
(``plan``), the tables it ships (``stored``), papermill sweeps (``sweep``), the executions its build just made
(``executed``), and the Sphinx extensions that execute its chapters in parallel (``parallel_build``), write its
status page (``build_status``) and keep its pages' consoles clean (``page_scripts``).
"""
