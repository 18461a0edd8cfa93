"""The chapters' figures, one module an analysis family: ``curves`` (losses against step, over seeds and
variants), ``matrices`` (tasks and completions as grids), ``attention`` (maps, families, patching),
``representations`` (probes, embeddings), ``comparisons`` (baselines, out of distribution) and
``progress`` (measures, leads and alarms)."""
