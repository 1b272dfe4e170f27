"""Benchmarks of the course: scripts that measure and print numbers, run from the repository's root.

    python -m benchmarks.compare_torch          # our model against torch.nn.Transformer, same weights
    python -m benchmarks.gpu_profile --help     # the GPU profile of lesson 08b
    python -m benchmarks.ablations --help       # the ablation suite of lesson 10

``results/`` holds the committed records they write (its README says which writes what);
:mod:`benchmarks.harness` is the timing harness they share. Nothing here is part of the
installed ``minitransformer`` package.
"""
