"""The settings of every stage and command, and the flags generated from them: the settings classes
(`options`), the generator (`stage_config`), the flags left to Beam (`beam_flags`), and the fields
several settings share (`depth`, `dead_letter_limit`)."""
