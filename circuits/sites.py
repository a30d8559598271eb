"""Moved to `circuits.core.sites` (the vocabulary floor). This name stays only until the modules
still importing it (graph/, report/, claims/) import the new home; then it goes."""

from circuits.core.sites import NODE_KINDS, SITES, SiteInfo, hook_name, hook_names

__all__ = ["NODE_KINDS", "SITES", "SiteInfo", "hook_name", "hook_names"]
