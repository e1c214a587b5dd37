"""Its engine: the shared loop, with its one prompt set (the improved setting's answer prompt and question form,
its own system prompt)."""
from core.agents import prompts as loop_prompts
from core.agents.graph import LoopEngine, PromptSet
from core.techniques.react_noplan import prompts

ENGINE = LoopEngine({"improved": PromptSet(prompts.system_prompt, loop_prompts.answer_prompt,
                                           loop_prompts.question_message)})
