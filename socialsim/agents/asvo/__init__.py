"""asvo: everything of that paper in one package (agent, settings, operations and prompts, rules, metrics, report)."""
