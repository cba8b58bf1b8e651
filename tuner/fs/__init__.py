"""Files on tuner's own host, handled safely: atomic writes (:mod:`.atomic`), the one ``flock`` primitive
(:mod:`.flock`), the one rule for what root may act on (:mod:`.trust`), a user's file read with bounds
(:mod:`.inputfile`), and the SQL files next to the code that runs them (:mod:`.sqlfiles`)."""
