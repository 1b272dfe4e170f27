"""Authoring tools of the course (docs writer, site build, lesson plan), run from the repository's root;
``python -m tools.write_docs`` imports ``benchmarks.*`` and ``tools.*`` as packages. Not part of the library."""
