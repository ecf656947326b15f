"""The tool runtime: running tools and planning how their results are shown."""
