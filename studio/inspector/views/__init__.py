"""The memory inspector: search playground, facts, beliefs, mental models, context, replay."""
