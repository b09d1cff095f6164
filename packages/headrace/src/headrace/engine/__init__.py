"""The executor, as a small package: `context` (what every stage shares: the batch, the sample-op record, argument
evaluation), `cpu_stage` (readers and per-sample CPU ops), `gpu_stage` (GPU kernels, batch-wise, with its
look-ahead), `branches` (GPU steps inside `if` on data), `whole_batch`, `skips` (on_error="skip": failed samples
replaced by the readers' next ones), `options`, and `executor`, which joins the stages. Lower modules never import
higher ones; this file imports nothing, so importing a submodule runs no other."""
