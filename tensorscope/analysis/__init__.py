"""Explanations of failures and hazards, over plain recorded facts (torch-free)."""
