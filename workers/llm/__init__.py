"""The method's LLM steps through any OpenAI-compatible endpoint (vLLM, llama.cpp's server, Ollama,
LM Studio, TGI): `client` (the `schemas.protocols.LLM` implementation), `r5` (BiCon-Gate's one-shot
rewrite, offered to the gate), `editing` (SuCEA's evidence-guided query editing) and `stages`
(both as pipeline stages). Every failure of the endpoint is a declared `LLMUnavailable`: the
claim takes the R4 path or keeps its first retrieval, and its verdict says so."""
