"""Operations users write their training pipelines with."""
