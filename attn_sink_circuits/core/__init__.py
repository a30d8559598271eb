"""The vocabulary every package shares, one home per concept; everything else imports down into
it, and it imports nothing of the project above it:

    sites      activation kinds -> TransformerLens hook names, and the hook names' parsers
    nodes      graph node ids ("L3.H5", "L3.MLP", "L3.H5.k", "embed"): one builder, one parser
    identity   which model a result belongs to: its ModelInfo, key, weights hash, same_model
    lines      reading the line files (texts, problems, traces): one rule for a line's end
    texts      text files read with their kinds, hashed, remembered, split by kind
    mix_texts, long_texts   the bundled texts (data/texts) written again from their sources
    tokens     texts as token rows, and the token at position 0 (the only module with torch)
    traces     the math problems and the models' reasoning traces on them, read back

Nothing here but `tokens` imports torch at module level.
"""
