"""The vocabulary every package shares, one home per concept; everything else imports down into
it, and it imports nothing of the project above it:

    sites      activation kinds -> TransformerLens hook names, and the hook names' parsers
    nodes      graph node ids ("L3.H5", "L3.MLP", "L3.H5.k", "embed"): one builder, one parser
    identity   which model a result belongs to: its ModelInfo, key, weights hash, same_model

Nothing here imports torch at module level.
"""
