"""Sphinx configuration of bnpmix's documentation.

Built by ``sphinx-build -W -b html docs docs/_build/html`` (.ci/run)."""

import re
import sys
from pathlib import Path

import bnpmix

sys.path.insert(0, str(Path(__file__).parent / "_ext"))

project = "bnpmix"
author = "the bnpmix authors"
copyright = "the bnpmix authors"
version = release = bnpmix.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx-mathjax-offline",  # MathJax served from _static: the pages work without a network
    "numpydoc",
    "sphinx_gallery.gen_gallery",
    "bnpmix_docs",  # docs/_ext: the option table and the benchmark figures, rendered at build
]

exclude_patterns = ["_build", "examples", "auto_examples/*.ipynb", "auto_examples/*.py",
                    "auto_examples/*.zip", "auto_examples/*.md5", "auto_examples/*.json",
                    "sg_execution_times.rst"]
templates_path = ["_templates"]
default_role = "literal"
smartquotes = False  # --flags and '' stay as typed

autosummary_generate = True
autodoc_default_options = {"members": True, "show-inheritance": False}
autodoc_typehints = "none"
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False

# the page's table of contents names a method `fit()`, not `BayesianMixture.fit()`: the side
# bar keeps to its width
toc_object_entries_show_parents = "hide"

html_theme = "pydata_sphinx_theme"
html_title = f"bnpmix {release}"
html_static_path = ["_static"]
html_css_files = ["bnpmix.css"]
html_theme_options = {
    "navbar_align": "left",
    "show_toc_level": 2,
    "navigation_with_keys": False,
    "secondary_sidebar_items": ["page-toc"],
    "footer_start": ["copyright"],
    "footer_end": [],
}
html_sidebars = {"index": [], "benchmarks": []}
html_show_sourcelink = False

sphinx_gallery_conf = {
    "examples_dirs": "examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "download_all_examples": False,
    "remove_config_comments": True,
    "within_subsection_order": "FileNameSortKey",
    "matplotlib_animations": False,
    "write_computation_times": False,
}


def plain_bars(app, what, name, obj, options, lines):
    """The docstrings are plain text with math written out (``|x|``, ``|Σ|``): a bar is a
    character there, never the start of a reStructuredText substitution."""
    lines[:] = [re.sub(r"(?<!\\)\|", r"\\|", line) for line in lines]


def setup(app):
    app.connect("autodoc-process-docstring", plain_bars, priority=100)
