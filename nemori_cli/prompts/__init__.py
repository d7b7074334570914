"""One module per pipeline stage: the response model beside the prompt that asks for it.

Small models copy worked examples verbatim, so prompts describe fields rather
than show examples. Fixed instructions come first (the system message) so that
llama.cpp can reuse their KV cache across calls of the same stage.
"""
